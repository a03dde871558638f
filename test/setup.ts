// Test preload: make sure libhb is built before any suite starts its timers.
import { ensureNative } from "../ffi/build.ts";
ensureNative();
