// Deterministic test randomness shared by the kernel suites: mulberry32, uniform in [0, 1).
// Holds no state beyond each generator's closure.

/** A seeded generator of uniform floats in [0, 1) (the same sequence for the same seed). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
