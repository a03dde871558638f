// Encoders of mux server frames (shared/spec/mux.md): READY, ACCEPT, DATA, DONE, ERROR as bytes. Pure,
// no state. Header text never contains a newline: free text (model name, details) is sanitised.
import type { TopLogprob } from "../engine/serving/protocol.ts";

const enc = new TextEncoder();

/** One header word: no spaces, newlines or control characters. */
export function word(s: string): string {
  return s.replace(/[\s\x00-\x1f\x7f]+/g, "_") || "_";
}
function detailText(s: string): string {
  return s.replace(/[\r\n\x00-\x1f\x7f]+/g, " ").slice(0, 512).trim();
}
function lpText(x: number): string {
  return Number.isFinite(x) ? String(Math.round(x * 1e6) / 1e6) : "-inf";
}

export function readyFrame(model: string, slots: number, ctx: number): Uint8Array {
  return enc.encode(`READY ${word(model)} ${slots} ${ctx}\n`);
}

export function acceptFrame(id: string, slot: number, prompt: number, cached: number): Uint8Array {
  return enc.encode(`ACCEPT ${id} ${slot} ${prompt} ${cached}\n`);
}

/** DATA <id> <n>[ lp=.. top=tid:lp,..]\n<n bytes>\n (`body`: raw bytes, or text sent as UTF-8) */
export function dataFrame(id: string, body: Uint8Array | string, lp?: { lp: number; top: TopLogprob[] }): Uint8Array {
  if (typeof body === "string") body = enc.encode(body);
  const extra = lp ? ` lp=${lpText(lp.lp)} top=${lp.top.map((t) => `${t.id}:${lpText(t.lp)}`).join(",")}` : "";
  const head = enc.encode(`DATA ${id} ${body.length}${extra}\n`);
  const out = new Uint8Array(head.length + body.length + 1);
  out.set(head);
  out.set(body, head.length);
  out[out.length - 1] = 10;
  return out;
}

export type DoneReason = "stop" | "length" | "stopped";

export function doneFrame(id: string, reason: DoneReason, emitted: number, prompt: number, cached: number, tokS: number): Uint8Array {
  return enc.encode(`DONE ${id} ${reason} ${emitted} ${prompt} ${cached} ${(Math.round(tokS * 100) / 100).toFixed(2)}\n`);
}

export function errorFrame(id: string, code: string, detail = ""): Uint8Array {
  const d = detailText(detail);
  return enc.encode(`ERROR ${id} ${code}${d ? " " + d : ""}\n`);
}
