// POST /v1/embeddings on the shared fixture: a prompt's embedding is its final hidden state after the final norm,
// pooled (--pooling last | mean | cls) and L2-normalized unless `normalize: false`. Checked against the model itself:
// the last-token vector through lm_head gives an in-process Session's logits bit for bit; mean pooling (prefilled in
// chunks) equals the mean of the last-token vectors of every prefix, cls the first prefix's. Batches, base64 (the
// openai SDK's default, which it decodes) and errors naming the field. llama-server's POST /embedding: its shape,
// embd_normalize, and --pooling none's rows (each prefix's last-token vector).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { loadModel } from "../src/engine/model.ts";
import { Session } from "../src/engine/session.ts";
import { mm } from "../src/engine/mat.ts";
import type { Server } from "../src/server/server.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

describe.skipIf(!hasTiny)("POST /v1/embeddings", () => {
  let last: Server, mean: Server, cls: Server, none: Server;
  beforeAll(async () => {
    [last, mean, cls, none] = await Promise.all([startTiny({ slots: 2 }), startTiny({ slots: 2, pooling: "mean", chunk: 16 }),
      startTiny({ slots: 1, pooling: "cls" }), startTiny({ slots: 1, pooling: "none", chunk: 16, maxRowValues: 30 * 64 })]);
  });
  afterAll(async () => { await Promise.all([last, mean, cls, none].map((s) => s.stop())); });
  const PROMPT = Array.from({ length: 40 }, (_, i) => (i * 53) % 480 + 16);
  const embed = async (s: Server, body: object) => {
    const r = await post(s.url, "/v1/embeddings", body);
    return { status: r.status, j: (await r.json()) as any };
  };
  const vec = async (s: Server, input: number[] | string, normalize = false) =>
    Float32Array.from((await embed(s, { input, normalize })).j.data[0].embedding as number[]);

  test("last token, not normalized: lm_head of it is an in-process Session's logits, bit for bit", async () => {
    const m = loadModel(TINY), sess = new Session(m, { attn: "absorbed" }), want = sess.feed(PROMPT).slice();
    const v = await vec(last, PROMPT), got = new Float32Array(m.cfg.vocab_size);
    expect(v.length).toBe(m.cfg.hidden_size);
    mm(m.w.lm_head, v, 1, got, false);
    expect(Array.from(got)).toEqual(Array.from(want));
  });

  test("normalized by default: unit L2 norm, the same direction", async () => {
    const { status, j } = await embed(last, { input: PROMPT });
    expect(status).toBe(200);
    expect(j.object).toBe("list");
    expect(j.usage).toEqual({ prompt_tokens: PROMPT.length, total_tokens: PROMPT.length });
    const u = Float32Array.from(j.data[0].embedding as number[]), v = await vec(last, PROMPT);
    const norm = Math.hypot(...v);
    expect(Math.hypot(...u)).toBeCloseTo(1, 6);
    u.forEach((e, i) => expect(e).toBeCloseTo(v[i] / norm, 6));
  });

  test("mean pooling (prefilled in chunks of 16) is the mean of every prefix's last-token vector; cls the first's", async () => {
    const prefixes: Float32Array[] = [];
    for (let i = 1; i <= PROMPT.length; i++) prefixes.push(await vec(last, PROMPT.slice(0, i))); // (in turn: 40 at once would pass the queue limit)
    const D = prefixes[0].length, sum = new Float64Array(D);
    for (const p of prefixes) for (let i = 0; i < D; i++) sum[i] += p[i];
    expect(Array.from(await vec(mean, PROMPT))).toEqual(Array.from(Float32Array.from(sum, (s) => s / PROMPT.length)));
    expect(Array.from(await vec(cls, PROMPT))).toEqual(Array.from(prefixes[0]));
    // a second request whose prompt a slot already holds: every row computed again (no prefix reuse), same vector
    expect(Array.from(await vec(mean, PROMPT))).toEqual(Array.from(Float32Array.from(sum, (s) => s / PROMPT.length)));
  });

  test("llama-server's /embedding: [{index, embedding: [[…]]}], embd_normalize; pooling none: each token's row, raw", async () => {
    const llama = async (s: Server, path: string, body: object) => { const r = await post(s.url, path, body); return { status: r.status, j: (await r.json()) as any }; };
    const raw = await vec(last, PROMPT), { status, j } = await llama(last, "/embedding", { content: PROMPT });
    expect(status).toBe(200);
    expect(j).toEqual([{ index: 0, embedding: [(await embed(last, { input: PROMPT })).j.data[0].embedding] }]);
    expect((await llama(last, "/embeddings", { input: [PROMPT, PROMPT.slice(0, 5)], embd_normalize: -1 })).j)
      .toEqual([{ index: 0, embedding: [Array.from(raw)] }, { index: 1, embedding: [Array.from(await vec(last, PROMPT.slice(0, 5)))] }]);
    const norm = async (p: number) => Float32Array.from((await llama(last, "/embedding", { content: PROMPT, embd_normalize: p })).j[0].embedding[0]);
    const sum = (v: Float32Array, f: (x: number) => number) => v.reduce((a, x) => a + f(x), 0);
    expect(sum(await norm(1), Math.abs)).toBeCloseTo(1, 5);
    expect(Math.max(...Array.from(await norm(0), Math.abs))).toBeCloseTo(32760, 1);
    expect(sum(await norm(3), (x) => Math.abs(x) ** 3)).toBeCloseTo(1, 5);
    expect(Array.from(await norm(2))).toEqual((await embed(last, { input: PROMPT, embd_normalize: 2 })).j.data[0].embedding); // (the OpenAI route takes it too)
    // pooling none (prefilled in chunks of 16): row t is the prefix t's last-token vector, bit for bit, not normalized
    const rows = (await llama(none, "/embedding", { content: PROMPT.slice(0, 20) })).j[0].embedding as number[][];
    expect(rows.length).toBe(20);
    for (const t of [0, 7, 15, 16, 19]) expect(rows[t]).toEqual(Array.from(await vec(last, PROMPT.slice(0, t + 1))));
    // a response past its budget of token vectors (here 30 rows) is refused, naming the input, and the server goes on
    const over = await llama(none, "/embedding", { content: [PROMPT.slice(0, 20), PROMPT.slice(0, 20)] });
    expect([over.status, over.j.error.message]).toEqual([400, expect.stringMatching(/^content\.1: past 1920 values/)]);
    expect((await llama(none, "/embedding", { content: PROMPT.slice(0, 5) })).status).toBe(200);
    const oai = await embed(none, { input: PROMPT });
    expect([oai.status, oai.j.error.message]).toEqual([400, expect.stringMatching(/pools with none.*\/embedding/)]);
    const bad = await llama(last, "/embedding", { content: "x", input: "y" });
    expect([bad.status, bad.j.error.param]).toEqual([400, "content"]);
    const badNorm = await llama(last, "/embedding", { content: "x", embd_normalize: 1.5 });
    expect([badNorm.status, badNorm.j.error.param]).toEqual([400, "embd_normalize"]);
  });

  test("a batch of inputs in order, with usage summed; base64 is the f32 bytes (the openai SDK decodes it)", async () => {
    const texts = ["hello there", "a longer second input, with more tokens in it", "3"];
    const { j } = await embed(last, { input: texts });
    expect(j.data.map((d: any) => d.index)).toEqual([0, 1, 2]);
    for (const [i, t] of texts.entries()) expect(j.data[i].embedding).toEqual((await embed(last, { input: t })).j.data[0].embedding);
    const b64 = (await embed(last, { input: texts, encoding_format: "base64" })).j;
    for (const [i, d] of b64.data.entries()) {
      const bytes = Buffer.from(d.embedding, "base64");
      expect(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4))).toEqual(j.data[i].embedding);
    }
    expect(b64.usage.prompt_tokens).toBe(j.usage.prompt_tokens);
    const client = new OpenAI({ baseURL: `${last.url}/v1`, apiKey: "x", maxRetries: 0, timeout: 20000 });
    const r = await client.embeddings.create({ model: "tiny", input: texts });
    expect(r.data.map((d) => d.embedding)).toEqual(j.data.map((d: any) => Array.from(Float32Array.from(d.embedding))));
    expect(r.usage.prompt_tokens).toBe(j.usage.prompt_tokens);
  });

  test("vLLM's chat form: messages through the chat template (no generation prompt unless asked), as those ids", async () => {
    const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "What is a fortune cookie?" }];
    const ids = async (add: boolean) => ((await (await post(last.url, "/tokenize", { messages, add_generation_prompt: add })).json()) as any).tokens as number[];
    const [plain, withGen] = [await ids(false), await ids(true)];
    expect(withGen.length).toBeGreaterThan(plain.length);
    const { status, j } = await embed(last, { messages, normalize: false });
    expect(status).toBe(200);
    expect(j.usage.prompt_tokens).toBe(plain.length);
    expect(j.data[0].embedding).toEqual((await embed(last, { input: plain, normalize: false })).j.data[0].embedding);
    expect((await embed(last, { messages, add_generation_prompt: true, normalize: false })).j.data[0].embedding)
      .toEqual((await embed(last, { input: withGen, normalize: false })).j.data[0].embedding);
    const both = await embed(last, { input: "x", messages });
    expect([both.status, both.j.error.param]).toEqual([400, "input"]);
  });

  test("a client that goes away cancels every input of its batch, running or queued", async () => {
    const stats = async () => (await (await fetch(`${last.url}/slots`)).json()) as any;
    const metric = async (k: string) => Number(new RegExp(`^hummingbird_${k}_total (\\d+)`, "m").exec(await (await fetch(`${last.url}/metrics`)).text())![1]);
    const counts = async () => [await metric("requests_finished"), await metric("requests_failed")];
    const [fin0, fail0] = await counts(), req0 = await metric("requests");
    const ac = new AbortController(), inputs = Array.from({ length: 64 }, (_, i) => Array.from({ length: 300 }, (_, k) => ((i + 1) * (k + 7)) % 480 + 16));
    const p = fetch(`${last.url}/v1/embeddings`, { method: "POST", signal: ac.signal, headers: { "content-type": "application/json" }, body: JSON.stringify({ input: inputs }) }).catch(() => null);
    // until the engine has them all (submitted: counted at once, where the worker's busy count lags up to 250 ms) —
    // aborting a fetch the server has not yet received cancels nothing there
    let sent = false;
    for (let i = 0; i < 2000 && !sent; i++) sent = (await metric("requests")) - req0 >= 64 || (await Bun.sleep(2), false);
    expect(sent).toBe(true);
    ac.abort();
    await p;
    // every input ends, most of them cancelled (only those done before the abort finished); the counts and /slots come
    // from the worker's stats, posted every 250 ms: wait for them rather than read a report from before the abort
    let [fin, fail] = await counts(), st = await stats();
    for (let i = 0; i < 400 && (fin - fin0 + fail - fail0 < 64 || st.busy > 0 || st.queue > 0); i++) {
      await Bun.sleep(25);
      [fin, fail] = await counts();
      st = await stats();
    }
    expect([st.busy, st.queue]).toEqual([0, 0]);
    expect(fin - fin0 + fail - fail0).toBe(64);
    expect(fail - fail0).toBeGreaterThan(32);
  });

  test("bad input: 400 naming the field, and the server goes on", async () => {
    const bad = async (body: object, param: string, msg: RegExp) => {
      const { status, j } = await embed(last, body);
      expect(status).toBe(400);
      expect(j.error.param).toBe(param);
      expect(j.error.message).toMatch(msg);
    };
    await bad({ input: "x", dimensions: 7 }, "dimensions", /dimensions/);
    await bad({ input: "" }, "input", /empty/);
    await bad({ input: [[1, 2], [3, 1 << 30]] }, "input.1", /outside/);
    await bad({ input: "x", encoding_format: "int8" }, "encoding_format", /float|base64/);
    await bad({ input: [] }, "input", /.+/);
    await bad({ inputs: "x" }, "input", /.+/);
    expect((await embed(last, { input: "still here" })).status).toBe(200);
  });
});
