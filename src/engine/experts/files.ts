// The files an expert store reads: one fd per safetensors file holding expert tensors — O_DIRECT when
// asked and every file passes a probe read, else buffered — and, in mmap mode, each file mapped whole.
// Also the read buffers (weight memory, src/native/mem.ts: aligned for O_DIRECT). State: the fds and the mappings, until close.
import { statSync } from "node:fs";
import { ModelError } from "../../model/errors.ts";
import * as io from "./io.ts";
import { weightBytes } from "../../native/mem.ts";

export class ExpertFiles {
  readonly direct: boolean;
  /** file -> address of its mapping (mmap mode only) */
  readonly mapAddrs = new Map<string, number>();
  private readonly fds = new Map<string, number>();
  private readonly lens = new Map<string, number>();

  constructor(files: readonly string[], want: { direct: boolean; mmap: boolean }, log: (line: string) => void) {
    this.direct = want.direct && !want.mmap && this.openDirect(files, log);
    try {
      for (const file of files) {
        if (this.fds.has(file)) continue;
        const fd = io.openRaw(file, false);
        if (fd < 0) throw new ModelError(`cannot open for expert reads: ${io.ioErrorText(fd)}`, { file });
        this.fds.set(file, fd);
      }
      if (want.mmap) for (const [file, fd] of this.fds) {
        const len = statSync(file).size, addr = io.mapFile(fd, len);
        if (addr === null) throw new ModelError("mmap failed", { file });
        this.mapAddrs.set(file, addr);
        this.lens.set(file, len);
      }
    } catch (e) {
      this.close();
      throw e;
    }
  }

  fd(file: string): number { return this.fds.get(file)!; }
  /** address of byte `off` of a mapped file */
  mapped(file: string, off: number): number { return this.mapAddrs.get(file)! + off; }

  /** a read buffer of `bytes` in weight memory (aligned to io.DIRECT_ALIGN = WEIGHT_ALIGN: O_DIRECT reads land in it) */
  buffer(bytes: number): Uint8Array {
    return weightBytes(Math.max(bytes, 1));
  }

  close(): void {
    for (const [file, addr] of this.mapAddrs) io.unmapFile(addr, this.lens.get(file)!);
    for (const fd of this.fds.values()) io.closeFd(fd);
    this.mapAddrs.clear();
    this.lens.clear();
    this.fds.clear();
  }

  /** O_DIRECT fds for every file, probed with one aligned read; false (with a warning) where unsupported. */
  private openDirect(files: readonly string[], log: (line: string) => void): boolean {
    const opened: [string, number][] = [];
    const probe = weightBytes(io.DIRECT_ALIGN);
    for (const f of files) {
      const fd = process.env.HB_IO_NODIRECT ? -22 : io.openRaw(f, true);
      let why = fd < 0 ? io.ioErrorText(fd) : "";
      if (fd >= 0) {
        const r = io.wait(io.submit([{ fd, off: 0, len: io.DIRECT_ALIGN, need: 0, bufOff: 0 }], probe, io.Kind.read));
        if (r < 0) { why = io.ioErrorText(r); io.closeFd(fd); }
        else { opened.push([f, fd]); continue; }
      }
      for (const [, d] of opened) io.closeFd(d);
      log(`experts: --direct is not supported for ${f} (${why}); falling back to buffered reads`);
      return false;
    }
    for (const [f, fd] of opened) this.fds.set(f, fd);
    return true;
  }
}
