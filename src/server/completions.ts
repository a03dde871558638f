// POST /v1/completions: a raw prompt (text or token ids, or a batch of them) continued as one text_completion or SSE
// chunks; think tags appear literally. Legacy logprobs; `echo` puts the prompt (and its logprobs, as
// lm-evaluation-harness reads them) first; grammars and `n` as on the chat route (fields: docs/api.md).
// State: per request only (each choice's text).
import type { EngineClient } from "./engine-client.ts";
import { collectChoices, finishReason, literalText, promptLogprobs, responseId, sseResponse, streamChoices, timings, TokenIds, usageAll, usageSoFar, type ChoiceView, type Done, type Tok } from "./gen-stream.ts";
import { errorJson, errorResponse, fromWorker } from "./http-errors.ts";
import type { GenRequest, GrammarSpec, PromptSpec, ReqEvent, TopLogprob } from "../engine/serving/protocol.ts";
import { budgetOf, CompletionRequest, penaltiesOf, samplersOf, stoppingOf } from "./schemas.ts";
import { basicSampling, defaultsOf, startGeneration, type Defaults, type RouteOptions } from "./routes-common.ts";


/** the request's prompts: one, or a batch (a list of strings or of token-id lists; /v1/embeddings' input too) */
export function promptsOf(p: string | string[] | number[] | number[][]): PromptSpec[] {
  if (typeof p === "string") return [{ kind: "text", text: p }];
  if (typeof p[0] === "number") return [{ kind: "ids", ids: p as number[] }];
  return (p as (string | number[])[]).map((q) => (typeof q === "string" ? { kind: "text", text: q } : { kind: "ids", ids: q }));
}

/** one generation request per prompt (startGeneration adds the `n` choices of each) */
function toGen(b: CompletionRequest, grammar: GrammarSpec | null, d: Defaults): GenRequest[] {
  return promptsOf(b.prompt).map((prompt) => ({
    prompt, slot: b.slot ?? "auto", max_tokens: b.max_tokens ?? 16, // OpenAI's default (cut to the context; one asked for is not)
    ...(b.max_tokens != null ? { max_tokens_field: "max_tokens" } : {}),
    ...basicSampling(b, d.sampling),
    seed: b.seed ?? undefined, logprobs: b.logprobs ?? undefined, echo: b.echo ?? false,
    ...(b.prompt_logprobs != null ? { prompt_logprobs: b.prompt_logprobs } : {}),
    stop: b.stop == null ? [] : typeof b.stop === "string" ? [b.stop] : b.stop,
    ...(grammar ? { grammar } : {}), penalties: penaltiesOf(b, undefined, d.sampling.repetition_penalty), ...stoppingOf(b), ...samplersOf(b), ...budgetOf(b), ...(b.skip_special_tokens === false ? { keepSpecial: true } : {}),
  }));
}

interface Lp { tokens: string[]; token_logprobs: (number | null)[]; top_logprobs: (Record<string, number> | null)[]; text_offset: number[] }
/** one token's entries (an echoed prompt's first token: logprob and alternatives null) */
function addLp(lp: Lp, tt: string, v: number | null, top: TopLogprob[] | null | undefined, offset: number): void {
  lp.tokens.push(tt);
  lp.token_logprobs.push(v);
  lp.top_logprobs.push(top === null ? null : Object.fromEntries((top ?? []).map((t) => [t.text, t.lp])));
  lp.text_offset.push(offset);
}

const emptyLp = (): Lp => ({ tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] });

/** One choice: text with think tags written out, legacy logprobs. */
class TextChoice implements ChoiceView {
  private text = "";
  private readonly lp = emptyLp(); // (for `final`: none kept while streaming)
  private plp: ReturnType<typeof promptLogprobs> | undefined;
  streaming?: boolean;
  private firstSent = false;
  /** k: logprobs' alternatives; pk: prompt_logprobs' (undefined: not asked); ids: return_token_ids (null: not asked) */
  constructor(private readonly wantLp: boolean, private readonly k = 0, private readonly pk?: number, private readonly ids: TokenIds | null = null) {}

  /** with return_token_ids: the output's ids since the last object on the first of objs, the prompt's on the choice's first */
  private withIds(objs: object[]): object[] {
    if (!this.ids) return objs;
    this.ids.attach(objs);
    if (objs.length && !this.firstSent) { Object.assign(objs[0], { prompt_token_ids: this.ids.prompt }); this.firstSent = true; }
    return objs;
  }

  onPrompt(e: Extract<ReqEvent, { t: "prompt" }>): object[] {
    if (this.pk !== undefined && e.toks) this.plp = promptLogprobs(e.toks, this.pk);
    const withPlp = this.plp ? { prompt_logprobs: this.plp } : {};
    if (!e.echo) return this.withIds([{ text: "", logprobs: null, finish_reason: null, ...withPlp }]);
    let lp: Lp | null = null;
    if (this.wantLp && e.toks) {
      lp = emptyLp();
      let at = 0;
      for (const t of e.toks) {
        const top = t.top && t.top.slice(0, this.k);
        addLp(lp, t.tt, t.lp, top, at);
        if (!this.streaming) addLp(this.lp, t.tt, t.lp, top, at);
        at += t.tt.length;
      }
    }
    this.text += e.text;
    return this.withIds([{ text: e.text, logprobs: lp, finish_reason: null, ...withPlp }]);
  }

  onTok(e: Tok): object[] {
    const text = literalText(e);
    let lp: Lp | null = null;
    if (this.wantLp) {
      addLp((lp = emptyLp()), e.tt ?? "", e.lp ?? 0, e.top, this.text.length);
      if (!this.streaming) addLp(this.lp, e.tt ?? "", e.lp ?? 0, e.top, this.text.length);
    }
    this.text += text;
    this.ids?.push(e.id);
    return this.withIds(text || lp ? [{ text, logprobs: lp, finish_reason: null }] : []);
  }

  onDone(e: Done): object[] {
    this.text += e.text;
    return this.withIds([{ text: e.text, logprobs: null, finish_reason: finishReason(e.reason) }]);
  }

  final(e: Done): object {
    return { text: this.text, logprobs: this.wantLp ? this.lp : null, finish_reason: finishReason(e.reason), ...(this.plp ? { prompt_logprobs: this.plp } : {}),
      ...(this.ids ? { prompt_token_ids: this.ids.prompt, token_ids: this.ids.all } : {}) };
  }
}

export async function completions(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const started = await startGeneration(req, engine, o, CompletionRequest, (b, g) => toGen(b, g, defaultsOf(engine, o)), "prompt");
  if (started instanceof Response) return started;
  const { data, runs, abandon } = started;
  const base = { id: responseId("cmpl"), object: "text_completion", created: Math.floor(Date.now() / 1000), model: engine.info!.model, system_fingerprint: o.fingerprint };
  const views = runs.map((run) => new TextChoice(run.gen.logprobs !== undefined, run.gen.logprobs ?? 0, run.gen.prompt_logprobs,
    run.gen.return_ids ? new TokenIds(run.first) : null));

  if (data.stream) {
    const withUsage = data.stream_options?.include_usage === true, running = withUsage && data.stream_options?.continuous_usage_stats === true;
    return sseResponse(req, async (send) => {
      const r = await streamChoices(runs, views, abandon,
        (choices, p, d) => send({ ...base, choices, ...(withUsage ? { usage: running ? usageSoFar(p, data.n ?? 1) : null } : {}),
          ...(d && runs.length === 1 ? { timings: timings(d) } : {}) }));
      if (!Array.isArray(r)) { send(errorJson(fromWorker(r.code, r.detail, "prompt"))); return false; }
      if (withUsage) send({ ...base, choices: [], usage: usageAll(r, data.n ?? 1) });
      return true;
    }, started);
  }

  const r = await collectChoices(runs, views, abandon, o.http.maxReplyBytes);
  if ("t" in r) return errorResponse(fromWorker(r.code, r.detail, "prompt"));
  return Response.json({ ...base, choices: r.choices, usage: usageAll(r.dones, data.n ?? 1), ...(runs.length === 1 ? { timings: timings(r.dones[0]) } : {}) });
}
