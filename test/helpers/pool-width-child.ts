// Child of test/kernels.test.ts's pool-width test, run pinned to two CPUs (taskset) beside a busy process pinned to one
// of them: int8 decode-sized calls (a pool job each) until the pool drops a thread, then, once told the busy process is
// gone (a line on stdin), until it is back at two. Every result is checked against the first. Prints one JSON line.
import { Fmt, hb, matmulQ8, poolWidth } from "../../src/native/hb.ts";

const threads = hb().hb_init(2), O = 1024, I = 512;
const W = Uint8Array.from({ length: O * I }, (_, i) => (i * 2654435761) >>> 24), sc = new Float32Array(O).fill(0.01);
const x = Float32Array.from({ length: I }, (_, i) => Math.sin(i)), ref = new Float32Array(O), y = new Float32Array(O);
matmulQ8(Fmt.int8, W, sc, 0, O, I, x, 1, ref);
let differ = 0;
const calls = (most: number, done: () => boolean) => {
  let k = 0;
  for (; k < most && !done(); k++) {
    y.fill(NaN);
    matmulQ8(Fmt.int8, W, sc, 0, O, I, x, 1, y);
    if (!y.every((v, i) => Object.is(v, ref[i]))) differ++;
  }
  return k;
};
const toDrop = calls(200_000, () => poolWidth().drops > 0);
const dropped = poolWidth();
process.stdout.write("dropped\n");
for await (const _ of console) break; // the busy process is gone
const toBack = calls(400_000, () => poolWidth().width === 2);
console.log(JSON.stringify({ threads, toDrop, dropped, toBack, back: poolWidth(), differ }));
