// Public API of the constrained-output grammar engine (GBNF, JSON Schema, token masks).
//   const vocab = TokenVocab.fromTokenizerJson(tokenizerJson, { eosIds: cfg.stop_ids }); // once per tokenizer
//   const g = compileGrammar(schemaToGbnf(schema));  // once per grammar (shareable, caches masks)
//   const gs = g.state(vocab);                       // once per generation
//   loop: if (gs.mask(logits) === 0) stop; id = sampler.sample(logits); gs.accept(id); if (gs.isDone()) stop
// Holds no state itself.
export { GrammarError } from "./errors.ts";
export { parseGbnf, type ParsedGrammar, type RuleDef, type Expr } from "./gbnf.ts";
export { compile, type CompiledGrammar } from "./compile.ts";
export { compileGrammar, Grammar, GrammarState } from "./state.ts";
export { TokenVocab, loadTokenVocab, type Trie } from "../../model/vocab.ts";
export { schemaToGbnf, jsonObjectGbnf, type SchemaOpts } from "./schema.ts";
export { gbnfLiteral } from "./literal.ts";
export { responseFormatGbnf } from "./response-format.ts";
export { regexToGbnf } from "./regex.ts";
export { forcedDraft, maskDraftRows } from "./draft.ts";
