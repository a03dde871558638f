// The specifier to start a Worker from a file beside this one in src/engine/serving/ (worker.ts, tokenizer-worker.ts):
// in a `bun build --compile` binary, which lists each as an entrypoint, modules live under /$bunfs/root/ named
// relative to src/; in a checkout, the file's URL. No state.
export const workerSpec = (file: string): string =>
  import.meta.url.includes("$bunfs") ? `./engine/serving/${file}` : new URL(`./${file}`, import.meta.url).href;
