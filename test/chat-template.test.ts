// Where a model directory's chat template comes from (src/model/chat-template.ts): chat_template.jinja, then
// chat_template.json, then tokenizer_config.json; named lists ("default", "tool_use" for requests with tools);
// --chat-template over all; bad values, unparsable templates, FIFOs and oversized files are ModelErrors naming the file.
import { afterAll, describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { genModel } from "./helpers/models.ts";
import { loadTokenizer } from "../src/model/tokenizer.ts";
import { MAX_TEMPLATE_FILE } from "../src/model/chat-template.ts";
import { ModelError } from "../src/model/errors.ts";

const gen = genModel({ preset: "tiny", seed: 5 });
const root = mkdtempSync(join(tmpdir(), "hb-chat-template-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const cfg = JSON.parse(readFileSync(join(gen, "tokenizer_config.json"), "utf8"));
let n = 0;
/** a copy of the generated model directory: tokenizer_config.json's chat_template set to `inConfig` (undefined:
 *  removed), and the other files given */
function dir(inConfig: unknown, files: Record<string, string> = {}): string {
  const d = join(root, `d${n++}`);
  cpSync(gen, d, { recursive: true });
  const c = { ...cfg, chat_template: inConfig };
  if (inConfig === undefined) delete c.chat_template;
  writeFileSync(join(d, "tokenizer_config.json"), JSON.stringify(c));
  for (const [f, text] of Object.entries(files)) writeFileSync(join(d, f), text);
  return d;
}
const T = (tag: string) => `${tag}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if tools %}+tools{% endif %}`;
const msgs = [{ role: "user", content: "hi" }];
const render = (d: string, tools?: unknown[]) => loadTokenizer(d).chat(msgs, { tools });
const refused = (f: () => unknown): ModelError => { try { f(); } catch (e) { return e as ModelError; } throw new Error("not refused"); };

describe("chat template sources", () => {
  test("chat_template.jinja, then chat_template.json, then tokenizer_config.json", () => {
    expect(render(dir(T("C")))).toBe("C[user:hi]");
    expect(render(dir(T("C"), { "chat_template.jinja": T("J") }))).toBe("J[user:hi]");
    expect(render(dir(undefined, { "chat_template.jinja": T("J") }))).toBe("J[user:hi]");
    expect(render(dir(T("C"), { "chat_template.json": JSON.stringify({ chat_template: T("S") }) }))).toBe("S[user:hi]");
    expect(render(dir(T("C"), { "chat_template.jinja": T("J"), "chat_template.json": JSON.stringify({ chat_template: T("S") }) }))).toBe("J[user:hi]");
    expect(loadTokenizer(dir(T("C"), { "chat_template.jinja": T("J") }), T("O")).chat(msgs)).toBe("O[user:hi]"); // --chat-template
  });

  test("named templates: default (else the first), tool_use for requests with tools", () => {
    const named = [{ name: "rag", template: T("R") }, { name: "default", template: T("D") }, { name: "tool_use", template: T("U") }];
    const d = dir(named), tools = [{ type: "function", function: { name: "f" } }];
    expect(render(d)).toBe("D[user:hi]");
    expect(render(d, tools)).toBe("U[user:hi]+tools");
    expect(render(dir([{ name: "rag", template: T("R") }]), tools)).toBe("R[user:hi]+tools");
    expect(loadTokenizer(d).templateText).toBe(T("D"));
    expect(render(dir(undefined, { "chat_template.json": JSON.stringify({ chat_template: named }) }), tools)).toBe("U[user:hi]+tools");
  });

  test("no template anywhere: chat() says where it looked", () => {
    const e = refused(() => render(dir(undefined)));
    expect(e.message).toContain("chat_template.jinja, chat_template.json or tokenizer_config.json");
  });

  test("bad values, templates that do not parse, FIFOs and oversized files name the file", () => {
    const bad = (d: string) => refused(() => loadTokenizer(d));
    let e = bad(dir(5));
    expect([e.file, e.field]).toEqual([expect.stringContaining("tokenizer_config.json"), "chat_template"]);
    e = bad(dir([{ name: "default" }]));
    expect(e.field).toBe("chat_template[0].template");
    e = bad(dir(T("C"), { "chat_template.jinja": "{% for m in messages %}" }));
    expect([e.file?.endsWith("chat_template.jinja"), e.field, e.message.includes("does not parse")]).toEqual([true, "chat_template", true]);
    e = bad(dir(T("C"), { "chat_template.json": "{ nope" }));
    expect(e.file?.endsWith("chat_template.json")).toBe(true);
    e = bad(dir(T("C"), { "chat_template.json": "null" }));
    expect([e.file?.endsWith("chat_template.json"), e.detail]).toEqual([true, "not a JSON object"]);
    e = bad(dir(T("C"), { "chat_template.jinja": "x".repeat(MAX_TEMPLATE_FILE + 1) }));
    expect(e.message).toContain("-byte limit");
    const f = dir(T("C"));
    expect(Bun.spawnSync(["mkfifo", join(f, "chat_template.jinja")]).exitCode).toBe(0);
    const t0 = performance.now();
    e = bad(f);
    expect(e.message).toContain("not a regular file");
    expect(performance.now() - t0).toBeLessThan(2000);
  });
});
