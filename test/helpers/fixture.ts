// Locates ../shared/fixtures (beside the repo) and reads the reference JSON files; suites skip,
// saying so, when the shared folder is absent. Also the checks shared by the CPU and device suites.
import { expect } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";

export const SHARED = resolve(import.meta.dir, "../../../shared");
export const TINY = join(SHARED, "fixtures/glm-tiny");
export const DEMO = join(SHARED, "demo/glm-demo");
export const hasTiny = existsSync(join(TINY, "config.json"));
export const hasDemo = existsSync(join(DEMO, "config.json"));
if (!hasTiny) console.warn(`[skip] ${TINY} is absent: fixture suites are skipped`);

export interface Ref {
  prompt_ids: number[]; gen_ids: number[]; full_ids: number[];
  tf_logits: number[][]; tf_margin: number[]; mtp_logits: number[][];
  mtp_draft: { next_token: number; drafts: number[] }; mtp_draft_logits: number[][];
  dsa: { layer: number; kind: string; selected?: Record<string, number[]>; cut_tie_positions?: number[] }[];
}
export function readRef(name: string): Ref {
  return JSON.parse(readFileSync(join(TINY, "ref", `${name}.json`), "utf8"));
}

/** ‖a − b‖ / ‖b‖ over one row. */
export function relRms(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0, den = 0;
  for (let i = 0; i < b.length; i++) { num += (a[i] - b[i]) ** 2; den += b[i] ** 2; }
  return Math.sqrt(num / Math.max(den, 1e-300));
}

/** An onSelect hook recording each (layer, position)'s DSA selection, sorted, under "layer:pos". */
export function recordSelections(): { got: Map<string, number[]>; onSelect: (layer: number, pos: number, keys: ArrayLike<number>) => void } {
  const got = new Map<string, number[]>();
  return { got, onSelect: (layer, pos, keys) => got.set(`${layer}:${pos}`, Array.from(keys).sort((a, b) => a - b)) };
}

/** Every selection of a `full` DSA layer in the reference equals the recorded one (and there is at least one). */
export function expectSelections(ref: Ref, got: Map<string, number[]>): void {
  let checked = 0;
  for (const d of ref.dsa) {
    if (d.kind !== "full" || !d.selected) continue;
    for (const [pos, keys] of Object.entries(d.selected)) {
      expect({ at: `${d.layer}:${pos}`, keys: got.get(`${d.layer}:${pos}`) }).toEqual({ at: `${d.layer}:${pos}`, keys });
      checked++;
    }
  }
  expect(checked).toBeGreaterThan(0);
}
