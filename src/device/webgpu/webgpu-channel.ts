// The wire between webgpu.ts (the engine's side, which blocks) and dawn-host.ts (Dawn, in a Node
// process): requests and replies as length-prefixed frames over two FIFOs. A request is
// [u32 total][u32 json bytes][json][payload]; a reply [u32 total][i32 status][u32 text bytes][text][payload].
// Requests go one at a time, each answered before the next. Holds no state.

/** one recorded command: dispatch (binds: [buffer, byte offset, range]; pc: the push block), copy, fill */
export type Op =
  | { t: "d"; pipe: number; binds: [number, number, number][]; pc: number[]; g: [number, number, number] }
  | { t: "c"; src: number; soff: number; dst: number; doff: number; n: number }
  | { t: "f"; buf: number; off: number; n: number; value: number };

/** a request; `write` carries its bytes as the frame's payload, `read` gets its items' bytes back, in order, as the reply's */
export type Req =
  | { op: "init"; shaders: string }
  | { op: "buf"; id: number; bytes: number; chunk: number }
  | { op: "free"; id: number }
  | { op: "write"; id: number; off: number; n: number }
  | { op: "read"; items: { id: number; off: number; n: number }[] }
  | { op: "pipe"; id: number; shader: string; nbind: number; writes: number[]; defs: Record<string, number> }
  | { op: "submit"; cmd: number; gen: number; ops: Op[] }
  | { op: "wait"; cmd: number; gen: number; timeoutMs: number }
  | { op: "close" };

/** status: 0 ok, 1 a wait timed out, < 0 an error (VkResult / HBVK_E_* codes; -4 the device is lost) */
export interface Reply { status: number; text: string; payload: Uint8Array }

export function encodeReq(r: Req, payload?: Uint8Array): Uint8Array {
  const j = new TextEncoder().encode(JSON.stringify(r)), n = payload?.byteLength ?? 0;
  const f = new Uint8Array(8 + j.byteLength + n), dv = new DataView(f.buffer);
  dv.setUint32(0, f.byteLength - 4, true);
  dv.setUint32(4, j.byteLength, true);
  f.set(j, 8);
  if (payload) f.set(payload, 8 + j.byteLength);
  return f;
}

/** a request frame's body (after its length) */
export function decodeReq(b: Uint8Array): { req: Req; payload: Uint8Array } {
  const jl = new DataView(b.buffer, b.byteOffset).getUint32(0, true);
  return { req: JSON.parse(new TextDecoder().decode(b.subarray(4, 4 + jl))) as Req, payload: b.subarray(4 + jl) };
}

export function encodeReply(status: number, text = "", payload?: Uint8Array): Uint8Array {
  const t = new TextEncoder().encode(text), n = payload?.byteLength ?? 0;
  const f = new Uint8Array(12 + t.byteLength + n), dv = new DataView(f.buffer);
  dv.setUint32(0, f.byteLength - 4, true);
  dv.setInt32(4, status, true);
  dv.setUint32(8, t.byteLength, true);
  f.set(t, 12);
  if (payload) f.set(payload, 12 + t.byteLength);
  return f;
}

/** a reply frame's body (after its length) */
export function decodeReply(b: Uint8Array): Reply {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength), tl = dv.getUint32(4, true);
  return { status: dv.getInt32(0, true), text: new TextDecoder().decode(b.subarray(8, 8 + tl)), payload: b.subarray(8 + tl) };
}
