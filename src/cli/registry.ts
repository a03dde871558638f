// The subcommand registry: name → one-line summary + lazy loader of `src/cli/<name>.ts` (which
// exports `command: Command`). Lazy so `--help` and light commands never load the engine.
// To add a subcommand: write src/cli/<name>.ts exporting `command`, then add one line here.
import type { Command } from "./common.ts";

export interface Entry {
  summary: string;
  load(): Promise<Command>;
}

export const COMMANDS: Record<string, Entry> = {
  "make-model": {
    summary: "write a random glm_moe_dsa model directory (preset tiny|bench)",
    load: async () => (await import("./make-model.ts")).command,
  },
  inspect: {
    summary: "report a model directory's shape, tensors and byte budget",
    load: async () => (await import("./inspect.ts")).command,
  },
  logits: {
    summary: "teacher-forced logits of a token sequence as JSON",
    load: async () => (await import("./logits.ts")).command,
  },
  convert: {
    summary: "convert an HF checkpoint to a quantized container",
    load: async () => (await import("./convert.ts")).command,
  },
  generate: {
    summary: "generate tokens from a prompt (greedy or sampled)",
    load: async () => (await import("./generate.ts")).command,
  },
  chat: { summary: "chat with a model in the terminal (the KV cache kept between turns)", load: async () => (await import("./chat.ts")).command },
  serve: { summary: "serve a model over OpenAI-compatible HTTP and the mux protocol (or --stdio)", load: async () => (await import("./serve.ts")).command },
  cluster: { summary: "N serve replicas behind HAProxy (affinity, health checks, drain) on one machine", load: async () => (await import("./cluster.ts")).command },
  score: { summary: "lm-eval loglikelihood scores of (context, continuation) token requests", load: async () => (await import("./score.ts")).command },
  plan: { summary: "forecast a model's memory, expert cache, decode and prefill tok/s on this machine", load: async () => (await import("./plan.ts")).command },
  bench: { summary: "prefill / decode throughput, weight bytes per token and the memory roofline", load: async () => (await import("./bench.ts")).command },
};
