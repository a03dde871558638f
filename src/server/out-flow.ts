// Flow control of a streamed response (SSE, the mux): the bytes written that the client has not taken yet. Past
// HOLD_BYTES the response's requests are held (the engine stops decoding them and, a second later, lets a waiting
// request take their slots: scheduler.ts) until the connection takes them; a client that takes nothing for the
// server's idle timeout (--timeout) while bytes wait for it is dropped: its requests cancelled, the connection reset. Before, a client that stopped reading kept all its stream's output in the server's memory for
// as long as it kept the connection open (docs/security.md). State: per stream, the bytes waiting (in write order),
// whether its requests are held, and the stall clock.

/** bytes waiting for a client past which its requests are held (the connection and its pipe hold at most one more
 *  such chunk: 1,024 connections, ~1 GiB at the very most) */
export const HOLD_BYTES = 512 * 1024;

/** streams dropped for a stalled client, in this process (/metrics) */
export const flowTotals = { dropped: 0 };

/** The requests behind a stream: held while its client does not read, abandoned when it stalls or goes away. */
export interface FlowOwner { hold(on: boolean): void; abandon(): void }

export class OutFlow {
  readonly stream: ReadableStream<Uint8Array>;
  private ctl!: ReadableStreamDefaultController<Uint8Array>;
  private q: Uint8Array[] = [];     // written, not yet taken: the stream hands them out when the connection reads
  private bytes = 0;                // of them
  private taken = 0;                // bytes the connection has taken in all
  private held = false;
  private closing = false;          // no more writes: the stream ends once q is taken
  private dead = false;             // cancelled or dropped
  private wake: (() => void) | null = null; // a read waiting for bytes
  private timer: ReturnType<typeof setInterval> | null = null;
  private seen = 0;                 // `taken` at the last check
  private since = 0;                // when the client last took any (performance.now())

  /** stallMs: how long a client may take nothing while bytes wait for it (the server's idle timeout) */
  constructor(private owner: FlowOwner, private stallMs: number) {
    // highWaterMark 0: `pull` runs only for a read of the connection (one that can write), so `q` is what waits
    this.stream = new ReadableStream<Uint8Array>({
      start: (c) => { this.ctl = c; },
      pull: () => this.give(),
      cancel: () => { this.dead = true; this.stopTimer(); this.owner.abandon(); this.wake?.(); }, // the client went away
    }, { highWaterMark: 0 });
  }

  /** nothing more may be written (closed, cancelled or dropped) */
  get closed(): boolean { return this.closing || this.dead; }
  /** bytes written and not yet taken by the connection */
  get waiting(): number { return this.bytes; }

  write(b: Uint8Array): void {
    if (this.closed || b.length === 0) return;
    this.q.push(b);
    this.bytes += b.length;
    if (!this.held && this.bytes > HOLD_BYTES) { this.held = true; this.owner.hold(true); }
    this.startTimer();
    this.wake?.();
  }

  /** No more bytes: the stream ends once those waiting are taken (the stall clock runs until then). */
  close(): void {
    if (this.closed) return;
    this.closing = true;
    this.owner = { hold: () => {}, abandon: () => {} }; // its requests are over
    this.wake?.();
  }

  /** A read of the connection: everything waiting in one chunk, or the end, or a wait for the next write. */
  private async give(): Promise<void> {
    while (!this.dead && this.bytes === 0 && !this.closing) await new Promise<void>((res) => { this.wake = res; });
    this.wake = null;
    if (this.dead) return;
    if (this.bytes > 0) {
      const chunk = this.q.length === 1 ? this.q[0] : Buffer.concat(this.q, this.bytes);
      this.q = [];
      this.taken += this.bytes;
      this.bytes = 0;
      this.ctl.enqueue(chunk);
      if (this.held) { this.held = false; this.owner.hold(false); }
    } else {
      this.stopTimer();
      this.ctl.close();
    }
  }

  private startTimer(): void {
    if (this.timer) return;
    this.seen = this.taken;
    this.since = performance.now();
    this.timer = setInterval(() => this.check(), Math.min(1000, Math.max(50, this.stallMs / 4)));
    this.timer.unref?.();
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private check(): void {
    if (this.bytes === 0) return this.stopTimer();
    const now = performance.now();
    if (this.taken > this.seen) { this.seen = this.taken; this.since = now; return; }
    if (now - this.since < this.stallMs) return;
    // the client took none of the bytes waiting for it for the whole timeout: drop it (its requests, the connection)
    const owner = this.owner, n = this.bytes;
    flowTotals.dropped++;
    this.dead = true;
    this.q = [];
    this.bytes = 0;
    this.stopTimer();
    owner.abandon();
    this.wake?.();
    // (the connection is reset: what it holds goes too; Bun.serve's `development: false` keeps this off the log)
    this.ctl.error(new Error(`the client took none of ${n} bytes in ${(this.stallMs / 1000).toFixed(1)} s`));
  }
}
