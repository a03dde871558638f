// One progress line for every long wait on the terminal (convert, make-model, the expert warmup, the libhb build):
// on a TTY one line redrawn in place (`\r\x1b[K`: no stray characters when it shrinks) at most every 100 ms; otherwise
// plain lines, at most one a second (or one per step for counted work: `every`). The ETA is shown only once it can be
// trusted: after MIN_ETA_SHARE of the work and MIN_ETA_S seconds. State: one bar's start, last draw and line.
// Env: HB_PROGRESS=tty|plain|off overrides the TTY check (tests, logs). Also fmtBytes, for the byte counts logs print.

/** Human-readable byte count: `1.50 GiB`. */
export function fmtBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n, u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(2)} ${units[u]}`;
}

export const MIN_ETA_SHARE = 0.03, MIN_ETA_S = 1;

export interface ProgressOut { write(s: string): unknown; isTTY?: boolean; columns?: number }
export interface ProgressOpts {
  /** "bytes": a bar with %, GB/s and ETA; "count": `k/N` (the libhb build, experts) */
  unit?: "bytes" | "count";
  out?: ProgressOut;
  /** plain mode: a line per update (a few steps, each worth a line) instead of one a second */
  every?: boolean;
  /** the clock in ms (tests) */
  now?: () => number;
}

/** The mode HB_PROGRESS or the stream asks for. */
export function progressMode(out: ProgressOut): "tty" | "plain" | "off" {
  const e = process.env.HB_PROGRESS;
  if (e === "tty" || e === "plain" || e === "off") return e;
  return out.isTTY ? "tty" : "plain";
}

/** The ETA in seconds, or null before it can be trusted (too little done, too early, no progress). */
export function eta(done: number, total: number, elapsedS: number): number | null {
  if (total <= 0 || done <= 0 || done / total < MIN_ETA_SHARE || elapsedS < MIN_ETA_S) return null;
  return Math.max(0, ((total - done) * elapsedS) / done);
}

export class Progress {
  private readonly t0: number;
  private last = -Infinity;
  private drawn = false;
  readonly mode: "tty" | "plain" | "off";
  private readonly out: ProgressOut;
  private readonly now: () => number;

  constructor(readonly label: string, public total: number, private readonly o: ProgressOpts = {}) {
    this.out = o.out ?? process.stderr;
    this.mode = progressMode(this.out);
    this.now = o.now ?? (() => performance.now());
    this.t0 = this.now();
  }

  /** The text of the line at `done` (note: what is being worked on now). */
  line(done: number, note = ""): string {
    const { total } = this, s = (this.now() - this.t0) / 1000;
    if (this.o.unit === "count") return `${this.label}: ${done}/${total}${note ? ` ${note}` : ""}`;
    const f = total > 0 ? Math.min(1, done / total) : 1, w = 30, fill = Math.round(w * f);
    const rate = s >= 0.2 ? `  ${(done / 1e9 / s).toFixed(2)} GB/s` : "", e = eta(done, total, s);
    return `${this.label} [${"#".repeat(fill)}${" ".repeat(w - fill)}] ${(100 * f).toFixed(1)}%${rate}${e === null ? "" : `  ETA ${e.toFixed(0)}s`}${note ? `  ${note}` : ""}`;
  }

  /** Report `done` of total (drawn when due: the first call, the last one, and by the clock between). */
  update(done: number, note = ""): void {
    if (this.mode === "off") return;
    const t = this.now(), gap = this.mode === "tty" ? 100 : this.o.every ? 0 : 1000;
    if (this.drawn && t - this.last < gap && done < this.total) return;
    this.last = t;
    this.drawn = true;
    const text = this.line(done, note);
    // a TTY line never wraps (a wrapped line is not erased by \r\x1b[K: the stray characters)
    this.out.write(this.mode === "tty" ? `\r\x1b[K${text.slice(0, Math.max(20, (this.out.columns ?? 80) - 1))}` : `${text}\n`);
  }

  /** Finish: on a TTY the line is cleared (then `summary`, if any, printed as a line of its own). */
  end(summary?: string): void {
    if (this.mode === "tty" && this.drawn) this.out.write("\r\x1b[K");
    if (summary) this.out.write(`${summary}\n`);
  }

  elapsedS(): number { return (this.now() - this.t0) / 1000; }
}
