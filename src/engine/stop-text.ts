// Stop strings on a stream of text deltas: emits text that can no longer be the start of a stop
// string, holds back a suffix that still could be, and reports the first match (whose text and
// everything after it is never emitted). Each stop string runs a Knuth-Morris-Pratt automaton over the
// text's UTF-16 code units, so a delta costs O(its length × stops) whatever the stop strings and the
// held text are (searching the held text again on every delta cost O(held²) once a long held run
// broke: 117 ms for one delta at 65,536 held characters). State: the held-back text and each stop
// string's automaton state (its longest prefix the text ends with).

export class StopMatcher {
  private held = "";
  private readonly state: Int32Array;   // [stops]: code units of stop i the text now ends with (< its length)
  private readonly fail: Int32Array[];  // per stop: fail[k] = longest proper border of its first k + 1 units
  stopped = false;
  matched: string | null = null; // the stop string that ended the stream

  constructor(private readonly stops: string[]) {
    this.state = new Int32Array(stops.length);
    this.fail = stops.map(borders);
  }

  /** Add a delta; returns the text that is safe to emit now. */
  push(delta: string): string {
    if (this.stopped) return "";
    if (this.stops.length === 0) return delta;
    const s = this.held + delta, base = this.held.length;
    let cut = -1, keep = 0;
    for (let i = 0; i < this.stops.length; i++) {
      const stop = this.stops[i], f = this.fail[i];
      let q = this.state[i];
      for (let j = 0; j < delta.length; j++) {
        const c = delta.charCodeAt(j);
        while (q > 0 && stop.charCodeAt(q) !== c) q = f[q - 1];
        if (stop.charCodeAt(q) === c) q++;
        if (q === stop.length) { // the first match of this stop: it starts here in s
          const at = base + j + 1 - stop.length;
          if (cut < 0 || at < cut) { cut = at; this.matched = stop; }
          break;
        }
      }
      this.state[i] = q;
      if (q > keep) keep = q;
    }
    if (cut >= 0) {
      this.stopped = true;
      this.held = "";
      return s.slice(0, cut);
    }
    this.held = s.slice(s.length - keep);
    return s.slice(0, s.length - keep);
  }

  /** The stream ended without a match: release what was held. */
  flush(): string {
    const s = this.held;
    this.held = "";
    return this.stopped ? "" : s;
  }
}

/** KMP's failure table of p: b[k] = the length of the longest proper prefix of p[0..k] that is also its suffix. */
function borders(p: string): Int32Array {
  const b = new Int32Array(p.length);
  for (let k = 1, q = 0; k < p.length; k++) {
    while (q > 0 && p.charCodeAt(k) !== p.charCodeAt(q)) q = b[q - 1];
    if (p.charCodeAt(k) === p.charCodeAt(q)) q++;
    b[k] = q;
  }
  return b;
}
