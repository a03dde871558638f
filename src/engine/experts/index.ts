// Expert streaming from disk with a learning cache inside a RAM budget: the public surface.
// attachExperts(model, opts) -> ExpertStore (stats(), repin(), save(), close()). No state here.
export { attachExperts, residentBytes, type ExpertOptions } from "./attach.ts";
export { ExpertStore } from "./store.ts";
export type { ExpertStats } from "./stats.ts";
export { planBudget, type BudgetInput, type BudgetPlan } from "./budget.ts";
export { expertFlags, expertOptions, EXPERT_HELP, warmupFlags, warmupOption, WARMUP_HELP } from "./flags.ts";
export { warmExperts, type WarmupReport } from "./warmup.ts";
