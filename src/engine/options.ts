// Command-line option values, below the CLI so that the engine's own flag modules (experts/flags.ts) parse theirs the
// CLI's way: UsageError (bad input: exit 2, with the usage and a hint; src/cli/common.ts re-exports it), intOption and
// choice. No state.

/** Bad command-line input: printed as `hummingbird: <message>`, the hint (did you mean …?) and where the usage is (the
 *  whole `help` only on --help); exit 2. */
export class UsageError extends Error {
  constructor(message: string, readonly help?: string, readonly hint?: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** Parse a non-negative safe integer option value. */
export function intOption(v: string, name: string, help: string): number {
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(Number(v))) throw new UsageError(`--${name} must be a non-negative integer, got ${JSON.stringify(v)}`, help);
  return Number(v);
}

/** Parse one of a fixed set of option values. */
export function choice<T extends string>(v: string, name: string, allowed: readonly T[], help: string): T {
  if (!(allowed as readonly string[]).includes(v)) throw new UsageError(`--${name} must be one of ${allowed.join("|")}, got ${JSON.stringify(v)}`, help);
  return v as T;
}
