#!/usr/bin/env bun
// Hummingbird CLI entry (`bun src/cli.ts <command> ...`): dispatches to the registry in
// src/cli/registry.ts and maps errors to exit codes — 0 ok, 2 bad input (UsageError, ModelError,
// missing/unreadable files; printed as `hummingbird: <message>`, a usage error with a hint instead of the usage),
// 1 internal error. No state.
import { UsageError } from "./cli/common.ts";
import { COMMANDS } from "./cli/registry.ts";
import { nearest } from "./cli/suggest.ts";
import { ModelError } from "./model/errors.ts";

const VERSION = "0.1.0";

export function overallHelp(): string {
  const names = Object.keys(COMMANDS);
  const w = Math.max(...names.map((n) => n.length));
  return [
    "usage: hummingbird <command> [options]",
    "",
    "GLM-5-class (glm_moe_dsa) MoE inference engine.",
    "",
    "commands:",
    ...names.map((n) => `  ${n.padEnd(w)}  ${COMMANDS[n].summary}`),
    "",
    "Run `hummingbird <command> --help` for a command's options.",
    "exit codes: 0 ok, 2 bad input, 1 internal error",
  ].join("\n");
}

const FILE_ERRORS = new Set(["ENOENT", "EACCES", "ENOTDIR", "EISDIR", "EEXIST", "ENOSPC", "EROFS", "EPERM"]);

/** Run the CLI on `argv` (without `bun src/cli.ts`); resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  try {
    if (name === undefined) throw new UsageError(`missing command (one of: ${Object.keys(COMMANDS).join(", ")})`, overallHelp());
    if (name === "--help" || name === "-h") return out(overallHelp());
    if (name === "--version" || name === "-V") return out(VERSION);
    if (name === "help") {
      if (rest[0] === undefined) return out(overallHelp());
      const e = COMMANDS[rest[0]];
      if (!e) throw new UsageError(`unknown command ${JSON.stringify(rest[0])}`, overallHelp());
      return out((await e.load()).help);
    }
    const entry = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
    if (!entry) {
      const near = nearest(name, Object.keys(COMMANDS));
      throw new UsageError(`unknown command ${JSON.stringify(name)}`, overallHelp(), near ? `did you mean ${near}?` : undefined);
    }
    return await (await entry.load()).run(rest);
  } catch (e) {
    return report(e);
  }
}

function out(text: string): number {
  process.stdout.write(text + "\n");
  return 0;
}

function report(e: unknown): number {
  if (e instanceof UsageError) { // one line and a hint, not the whole usage (that is --help's)
    const usage = e.help && /^usage: (hummingbird(?: [a-z-]+)?)/.exec(e.help)?.[1];
    const where = usage ? `run '${usage.endsWith(" <command>") ? "hummingbird" : usage} --help' for ${usage === "hummingbird" ? "the commands" : "the options"}` : "";
    process.stderr.write(`hummingbird: ${e.message}\n${e.hint ? `hummingbird: ${e.hint}\n` : ""}${where ? `${where}\n` : ""}`);
    return 2;
  }
  if (e instanceof ModelError) {
    process.stderr.write(`hummingbird: ${e.message}\n`);
    return 2;
  }
  const code = (e as { code?: unknown } | null)?.code;
  if (e instanceof Error && typeof code === "string" && FILE_ERRORS.has(code)) {
    process.stderr.write(`hummingbird: ${e.message}\n`);
    return 2;
  }
  const msg = e instanceof Error ? (process.env.HUMMINGBIRD_DEBUG ? (e.stack ?? e.message) : e.message) : String(e);
  process.stderr.write(`hummingbird: internal error: ${msg}\n`);
  return 1;
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
