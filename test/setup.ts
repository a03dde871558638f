// Test preload: make sure libhb is built before any suite starts its timers, and give the run one temporary
// folder (TMPDIR, inherited by the processes tests start) that goes when the run ends: `bun test` runs no
// process "exit" handlers, so suites' own temporary folders would otherwise outlive it.
import { afterAll } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureNative } from "../ffi/build.ts";
ensureNative();
const run = mkdtempSync(join(tmpdir(), "hb-test-"));
process.env.TMPDIR = run;
afterAll(() => rmSync(run, { recursive: true, force: true }));
