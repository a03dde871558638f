// POST /slots/{id}?action=save|restore|erase (llama-server's slot persistence, --slot-save-path) on the shared
// fixture: a slot's KV saved, the slot erased, the file restored into another slot, and a greedy request pinned
// there reuses the restored prefix and generates exactly what the first one did; bad ids, actions, file names,
// missing files, a busy slot and a server without the flag are refused with the status and field named.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Server } from "../src/server/server.ts";
import { hasTiny } from "./helpers/fixture.ts";
import { post, startTiny } from "./server.helpers.ts";

describe.skipIf(!hasTiny)("serve: slot files", () => {
  const dir = mkdtempSync(join(tmpdir(), "hb-slot-files-"));
  let s: Server, off: Server;
  beforeAll(async () => { s = await startTiny({ slots: 2, slotSavePath: dir }); off = await startTiny({ slots: 1 }); });
  afterAll(async () => { await s.stop(); await off.stop(); rmSync(dir, { recursive: true, force: true }); });
  const prompt = "The history of the slot file begins with a long and winding prompt that a server would rather not prefill twice.";
  const complete = async (slot: number) => (await (await post(s.url, "/v1/completions", { prompt, max_tokens: 6, temperature: 0, slot })).json()) as any;
  const act = (id: number | string, action: string, body?: unknown, server = s) => post(server.url, `/slots/${id}?action=${action}`, body ?? {});
  const slotTokens = async (id: number) => ((await (await fetch(`${s.url}/slots`)).json()) as any).slots[id].tokens as number;
  /** slot id's token count once it satisfies ok (GET /slots shows the worker's latest stats, which may trail the last
   *  response by one message), or the last count seen after 2 s */
  const settled = async (id: number, ok: (n: number) => boolean) => {
    let n = await slotTokens(id);
    for (const t0 = performance.now(); !ok(n) && performance.now() - t0 < 2000; n = await slotTokens(id)) await Bun.sleep(20);
    return n;
  };

  test("save, erase, restore into another slot: the prefix is reused and the output is the same", async () => {
    const first = await complete(0);
    const held = await settled(0, (n) => n > first.usage.prompt_tokens);
    expect(held).toBeGreaterThan(first.usage.prompt_tokens);
    const saved = (await (await act(0, "save", { filename: "story.kv" })).json()) as any;
    expect(saved).toMatchObject({ id_slot: 0, filename: "story.kv", n_saved: held });
    expect(saved.n_written).toBeGreaterThan(0);
    expect(existsSync(join(dir, "story.kv"))).toBe(true);
    expect(((await (await act(0, "erase")).json()) as any)).toEqual({ id_slot: 0, n_erased: held });
    expect(await settled(0, (n) => n === 0)).toBe(0);
    const restored = (await (await act(1, "restore", { filename: "story.kv" })).json()) as any;
    expect(restored).toMatchObject({ id_slot: 1, filename: "story.kv", n_restored: held, n_read: saved.n_written });
    expect(await settled(1, (n) => n === held)).toBe(held);
    const again = await complete(1);
    expect(again.choices[0].text).toBe(first.choices[0].text);
    expect(again.usage.prompt_tokens_details.cached_tokens).toBe(first.usage.prompt_tokens - 1);
  });

  test("refusals name the field: id, action, file name, missing file, busy slot, no --slot-save-path", async () => {
    const expectError = async (r: Response, status: number, param: string | null, text: string) => {
      expect(r.status).toBe(status);
      const e = ((await r.json()) as any).error;
      expect(e.param).toBe(param);
      expect(e.message).toContain(text);
    };
    await expectError(await act(7, "save", { filename: "x.kv" }), 400, "id_slot", "outside [0, 2)");
    await expectError(await act("x", "save", { filename: "x.kv" }), 400, "id_slot", "not a non-negative integer");
    await expectError(await act(0, "delete"), 400, "action", "save, restore, erase");
    for (const filename of ["../escape.kv", ".hidden", "a/b.kv", "", "-x"]) await expectError(await act(0, "save", { filename }), 400, "filename", "plain file name");
    expect(existsSync(join(dir, "..", "escape.kv"))).toBe(false);
    await expectError(await act(0, "restore", { filename: "absent.kv" }), 404, "filename", "no slot file absent.kv");
    await expectError(await act(0, "erase", undefined, off), 400, null, "--slot-save-path");
    // busy: a long streamed request holds slot 0 while the save is asked for
    const ctl = new AbortController();
    const r = await fetch(`${s.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, signal: ctl.signal,
      body: JSON.stringify({ prompt, max_tokens: 400, temperature: 0, slot: 0, stream: true }) });
    const reader = r.body!.getReader();
    await reader.read(); // its first chunk: it runs
    await expectError(await act(0, "save", { filename: "busy.kv" }), 409, "id_slot", "busy");
    ctl.abort();
    await reader.cancel().catch(() => {});
  });
});
