// Stop strings on a stream of text deltas: emits text that can no longer be the start of a stop
// string, holds back a suffix that still could be, and reports the first match (whose text and
// everything after it is never emitted). Pure; holds only the held-back text.

export class StopMatcher {
  private held = "";
  stopped = false;
  matched: string | null = null; // the stop string that ended the stream

  constructor(private readonly stops: string[]) {}

  /** Add a delta; returns the text that is safe to emit now. */
  push(delta: string): string {
    if (this.stopped) return "";
    if (this.stops.length === 0) return delta;
    const s = this.held + delta;
    let cut = -1;
    for (const stop of this.stops) {
      const at = s.indexOf(stop);
      if (at >= 0 && (cut < 0 || at < cut)) { cut = at; this.matched = stop; }
    }
    if (cut >= 0) {
      this.stopped = true;
      this.held = "";
      return s.slice(0, cut);
    }
    const keep = this.holdLength(s);
    this.held = s.slice(s.length - keep);
    return s.slice(0, s.length - keep);
  }

  /** The stream ended without a match: release what was held. */
  flush(): string {
    const s = this.held;
    this.held = "";
    return this.stopped ? "" : s;
  }

  /** Longest suffix of s that is a proper prefix of some stop string. */
  private holdLength(s: string): number {
    let best = 0;
    for (const stop of this.stops) {
      for (let k = Math.min(stop.length - 1, s.length); k > best; k--) {
        if (s.endsWith(stop.slice(0, k))) { best = k; break; }
      }
    }
    return best;
  }
}
