// The grammar engine's limits, in one place: what a hostile grammar, schema or regex may cost before
// it is refused with a GrammarError. Work is counted in units (a parse stack visited, a schema node
// or rule byte produced), never in wall time, so refusals are the same on every machine. No state.

/** parse stacks alive in one matcher state (an ambiguous grammar doubles them per byte) */
export const MAX_LIVE_STACKS = 4096;
/** matcher work (stack visits) of one token mask, one accepted token or the start state */
export const STEP_WORK = 250_000;
/** stacks held by one matcher's intern tables before they are dropped (memory: ~100 B each) */
export const MAX_HELD_STACKS = 400_000;
/** characters of GBNF text one grammar may have (request text or converted from a schema; ~25 ms to compile) */
export const MAX_GBNF_CHARS = 256 << 10;
/** symbols after expanding repetitions (compile.ts) */
export const MAX_SYMBOLS = 1_000_000;
/** nesting of parentheses, of rules reached without consuming a byte, of schemas, of regex groups */
export const MAX_NESTING = 256;
/** schema -> GBNF work: schema nodes visited plus properties and list entries walked */
export const SCHEMA_WORK = 50_000;
