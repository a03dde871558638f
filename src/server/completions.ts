// POST /v1/completions: a raw prompt (text or token ids) continued as one text_completion or as SSE
// chunks. Think tags appear literally in the text. Legacy logprobs (`logprobs: k`) as
// {tokens, token_logprobs, top_logprobs, text_offset}. `response_format` / `grammar` constrain the
// output as on the chat route. State: per request only.
import type { EngineClient } from "./engine-client.ts";
import { finishReason, literalText, responseId, sseResponse, usage } from "./gen-stream.ts";
import { errorJson, errorResponse, fromWorker } from "./http-errors.ts";
import type { GenRequest, GrammarSpec, PromptSpec, ReqEvent } from "./protocol.ts";
import { CompletionRequest, penaltiesOf } from "./schemas.ts";
import { startGeneration, type RouteOptions } from "./routes-common.ts";

type Tok = Extract<ReqEvent, { t: "tok" }>;

function promptOf(p: CompletionRequest["prompt"]): PromptSpec {
  if (typeof p === "string") return { kind: "text", text: p };
  const one = p[0];
  if (typeof one === "string") return { kind: "text", text: one };
  if (typeof one === "number") return { kind: "ids", ids: p as number[] };
  return { kind: "ids", ids: one };
}

function toGen(b: CompletionRequest, grammar: GrammarSpec | null): GenRequest {
  return {
    prompt: promptOf(b.prompt), slot: b.slot ?? "auto", max_tokens: b.max_tokens ?? 16, // OpenAI's default
    temperature: b.temperature ?? 1, top_p: b.top_p ?? 1, min_p: b.min_p ?? 0, top_k: b.top_k ?? 0,
    seed: b.seed ?? undefined, logprobs: b.logprobs ?? undefined,
    stop: b.stop == null ? [] : typeof b.stop === "string" ? [b.stop] : b.stop,
    ...(grammar ? { grammar } : {}), penalties: penaltiesOf(b),
  };
}

interface Lp { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[]; text_offset: number[] }
function addLp(lp: Lp, e: Tok, offset: number): void {
  lp.tokens.push(e.tt ?? "");
  lp.token_logprobs.push(e.lp ?? 0);
  lp.top_logprobs.push(Object.fromEntries((e.top ?? []).map((t) => [t.text, t.lp])));
  lp.text_offset.push(offset);
}
const emptyLp = (): Lp => ({ tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] });

export async function completions(req: Request, engine: EngineClient, o: RouteOptions): Promise<Response> {
  const started = await startGeneration(req, engine, o, CompletionRequest, toGen, "prompt");
  if (started instanceof Response) return started;
  const { data, gen, r, first } = started;
  const base = { id: responseId("cmpl"), object: "text_completion", created: Math.floor(Date.now() / 1000), model: engine.info!.model, system_fingerprint: o.fingerprint };
  const wantLp = gen.logprobs !== undefined;
  let offset = 0;

  if (data.stream) {
    const withUsage = data.stream_options?.include_usage === true;
    const chunk = (text: string, lp: Lp | null, finish: string | null) => ({
      ...base, choices: [{ index: 0, text, logprobs: lp, finish_reason: finish }], ...(withUsage ? { usage: null } : {}),
    });
    return sseResponse(async (send) => {
      for (let e: ReqEvent = first; ; e = await r.q.next()) {
        if (e.t === "tok") {
          const text = literalText(e);
          let lp: Lp | null = null;
          if (wantLp) addLp((lp = emptyLp()), e, offset);
          offset += text.length;
          if (text || lp) send(chunk(text, lp, null));
        } else if (e.t === "done") {
          send(chunk(e.text, null, finishReason(e.reason)));
          if (withUsage) send({ ...base, choices: [], usage: usage(e) });
          return true;
        } else if (e.t === "error") {
          send(errorJson(fromWorker(e.code, e.detail, "prompt")));
          return false;
        }
      }
    }, r.abandon);
  }

  let text = "";
  const lp = emptyLp();
  for (let e: ReqEvent = first; ; e = await r.q.next()) {
    if (e.t === "tok") {
      if (wantLp) addLp(lp, e, text.length);
      text += literalText(e);
    } else if (e.t === "done") {
      text += e.text;
      return Response.json({ ...base, choices: [{ index: 0, text, logprobs: wantLp ? lp : null, finish_reason: finishReason(e.reason) }], usage: usage(e) });
    } else if (e.t === "error") return errorResponse(fromWorker(e.code, e.detail, "prompt"));
  }
}
