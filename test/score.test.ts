// Score mode: lm-eval loglikelihood semantics against the log-softmax of teacher-forced logits
// (in process and via the `logits` CLI command), batching-invariance, and input validation naming
// the line.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { genModel } from "./helpers/models.ts";
import { loadModel } from "../src/engine/model.ts";
import { Session } from "../src/engine/session.ts";
import { parseScoreRequests, score, type ScoreRequest } from "../src/engine/score.ts";

const REPO = resolve(import.meta.dir, "..");
const root = mkdtempSync(join(tmpdir(), "hb-score-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const dir = genModel({ preset: "tiny", seed: 3 });
const m = loadModel(dir);
const V = m.cfg.vocab_size;

function lsm(row: ArrayLike<number>): number[] {
  let mx = -Infinity;
  for (let i = 0; i < row.length; i++) mx = Math.max(mx, row[i]);
  let s = 0;
  for (let i = 0; i < row.length; i++) s += Math.exp(row[i] - mx);
  return Array.from(row, (x) => x - mx - Math.log(s));
}
/** Reference: Σ log-softmax(logits[i-1])[ids[i]] over the continuation, greedy = all argmax. */
function reference(logits: ArrayLike<number>[], r: ScoreRequest): [number, boolean] {
  let lp = 0, greedy = true;
  for (let i = r.ctxlen; i < r.ctxlen + r.contlen; i++) {
    const l = lsm(logits[i - 1]);
    lp += l[r.ids[i]];
    greedy &&= l.indexOf(Math.max(...l)) === r.ids[i];
  }
  return [lp, greedy];
}
const ids = (n: number, seed: number) => Array.from({ length: n }, (_, i) => 16 + ((i + 3) * (29 + seed) + seed) % 490);

describe("score", () => {
  const reqs: ScoreRequest[] = [
    { ctxlen: 5, contlen: 3, ids: ids(8, 1) },
    { ctxlen: 1, contlen: 1, ids: ids(2, 2) },
    { ctxlen: 12, contlen: 7, ids: ids(19, 3) },
    { ctxlen: 3, contlen: 9, ids: ids(12, 4) },
  ];

  test("equals log-softmax of teacher-forced logits, whatever the batching", () => {
    const a = score(m, reqs, { maxRows: 512 }); // all four in one forward
    const b = score(m, reqs, { maxRows: 1 });   // one request per forward
    reqs.forEach((r, k) => {
      const all = new Session(m).feed(r.ids, true);
      const rows = Array.from({ length: r.ids.length }, (_, i) => all.subarray(i * V, (i + 1) * V));
      const [lp, greedy] = reference(rows, r);
      expect(a[k].logprob).toBeCloseTo(lp, 4);
      expect(a[k].greedy).toBe(greedy);
      expect(a[k].contlen).toBe(r.contlen);
      expect(b[k].logprob).toBeCloseTo(a[k].logprob, 4);
    });
  });

  test("greedy is 1 for a continuation that is the model's own greedy output", () => {
    const s = new Session(m), p = ids(6, 5), out = [...p];
    let l = s.feed(p);
    for (let i = 0; i < 4; i++) { let t = 0; for (let v = 1; v < V; v++) if (l[v] > l[t]) t = v; out.push(t); l = s.feed([t]); }
    const [r] = score(m, [{ ctxlen: 6, contlen: 4, ids: out }]);
    expect(r.greedy).toBe(true);
    out[8] = (out[8] + 1) % V;
    expect(score(m, [{ ctxlen: 6, contlen: 4, ids: out }])[0].greedy).toBe(false);
  });

  test("input lines are validated with errors naming the line", () => {
    const bad: [string, RegExp][] = [
      ["2 2 20 21 22 23\n2 3 20 21 22 23\n", /^f line 2: ctxlen 2 \+ contlen 3 = 5 but the line has 4 ids/],
      ["1 1 20 x\n", /^f line 1: field 4 \("x"\) is not a non-negative integer/],
      ["1 1 20 -3\n", /^f line 1: field 4/],
      ["0 2 20 21\n", /^f line 1: ctxlen must be ≥ 1/],
      ["1 0 20\n", /^f line 1: expected/],
      ["\n1 1 20 9999\n", /^f line 2: id 1 \(9999\) is outside the vocabulary \[0, 512\)/],
    ];
    for (const [text, re] of bad) expect(() => parseScoreRequests(text, V, 4096, "f")).toThrow(re);
    expect(parseScoreRequests("1 1 20 21\n\n  2 1 3 4 5  \n", V, 4096)).toEqual([
      { ctxlen: 1, contlen: 1, ids: [20, 21] }, { ctxlen: 2, contlen: 1, ids: [3, 4, 5] }]);
    expect(() => parseScoreRequests("1 2 20 21 22\n", V, 2, "f")).toThrow(/f line 1: 3 ids exceed the model's context of 2/);
  });

  test("CLI: `score` lines match the log-softmax of the `logits` command", async () => {
    const file = join(root, "req.txt");
    writeFileSync(file, reqs.map((r) => `${r.ctxlen} ${r.contlen} ${r.ids.join(" ")}`).join("\n") + "\n");
    const run = async (...args: string[]) => {
      const p = Bun.spawn(["bun", "src/cli.ts", ...args], { cwd: REPO, stdout: "pipe", stderr: "pipe" });
      const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
      return { out, err, code };
    };
    const [sc, ...lg] = await Promise.all([
      run("score", "--model", dir, "--requests", file, "--batch-rows", "20"),
      ...reqs.map((r) => run("logits", "--model", dir, "--ids", r.ids.join(","))),
    ]);
    expect(sc.code).toBe(0);
    const lines = sc.out.trim().split("\n");
    expect(lines.length).toBe(reqs.length);
    reqs.forEach((r, k) => {
      const [lp, greedy] = reference(JSON.parse(lg[k].out).logits, r);
      const [a, b, c] = lines[k].split(" ");
      expect(Number(a)).toBeCloseTo(lp, 4);
      expect(Number(b)).toBe(r.contlen);
      expect(c).toBe(greedy ? "1" : "0");
    });
    writeFileSync(file, "3 1 20 21\n");
    const e = await run("score", "--model", dir, "--requests", file);
    expect(e.code).toBe(2);
    expect(e.err).toContain(`${file} line 1: ctxlen 3 + contlen 1 = 4 but the line has 2 ids`);
  }, 60_000);
});
