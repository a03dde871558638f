// `hummingbird serve` over HTTP on the glm-tiny fixture: /health while loading, the openai SDK
// (streaming and not), raw SSE, prefix reuse, logprobs, stop strings, validation errors naming the
// field, 413, auth, 429, /v1/models (and one model by id), /metrics, /slots (and its fail_on_no_slot), /ping and the unversioned aliases.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { startServer, type Server } from "../src/server/server.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { post, sseData, startTiny } from "./server.helpers.ts";

if (!hasTiny) console.warn("[skip] server suite: the glm-tiny fixture is absent");

describe.skipIf(!hasTiny)("serve: loading", () => {
  test("/health answers 503 loading before the model is ready, then 200 ok; generation is 503 meanwhile", async () => {
    const s = startServer({ dir: TINY, slots: 1, port: 0, loadDelayMs: 400 });
    try {
      const h = await fetch(`${s.url}/health`);
      expect(h.status).toBe(503);
      expect(await h.json() as any).toEqual({ status: "loading" });
      const g = await post(s.url, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }] });
      expect(g.status).toBe(503);
      expect((await g.json() as any).error.code).toBe("model_loading");
      await s.engine.ready;
      const ok = await fetch(`${s.url}/health`);
      expect(ok.status).toBe(200);
      expect(await ok.json() as any).toEqual({ status: "ok" });
    } finally {
      await s.stop();
    }
  });

  test("a model directory that fails to load: /health reports the error, requests get 503", async () => {
    const s = startServer({ dir: "/nonexistent-model-dir", slots: 1, port: 0 });
    try {
      await expect(s.engine.ready).rejects.toThrow();
      const h = await fetch(`${s.url}/health`);
      expect(h.status).toBe(503);
      expect((await h.json() as any).status).toBe("error");
    } finally {
      await s.stop();
    }
  });
});

describe.skipIf(!hasTiny)("serve: OpenAI API", () => {
  let s: Server;
  let client: OpenAI;
  const KEY = "test-key-123";
  const auth = { authorization: `Bearer ${KEY}` };
  const msgs = [{ role: "user" as const, content: "Tell me a story about a cat." }];

  beforeAll(async () => {
    s = await startTiny({ slots: 2, apiKey: KEY, maxBody: 4096 });
    client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 20000 });
  });
  afterAll(() => s.stop());

  test("SDK chat, non-streaming: shape, usage, finish_reason length", async () => {
    const r = await client.chat.completions.create({ model: "glm-tiny", messages: msgs, max_tokens: 8, temperature: 0 });
    expect(r.object).toBe("chat.completion");
    expect(r.model).toBe("glm-tiny");
    expect(r.choices).toHaveLength(1);
    expect(r.choices[0].message.role).toBe("assistant");
    expect(typeof r.choices[0].message.content).toBe("string");
    expect(["length", "stop"]).toContain(r.choices[0].finish_reason);
    expect(r.usage!.completion_tokens).toBeLessThanOrEqual(8);
    expect(r.usage!.total_tokens).toBe(r.usage!.prompt_tokens + r.usage!.completion_tokens);
    expect(r.usage!.prompt_tokens_details?.cached_tokens).toBeGreaterThanOrEqual(0);
  });

  test("SDK chat, streaming equals non-streaming at temperature 0; include_usage adds a usage chunk", async () => {
    const body = { model: "glm-tiny", messages: msgs, max_tokens: 10, temperature: 0 };
    const full = await client.chat.completions.create(body);
    const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    let text = "", finish: string | null = null, usage: OpenAI.CompletionUsage | null | undefined = null;
    for await (const ch of stream) {
      if (ch.choices[0]?.delta?.content) text += ch.choices[0].delta.content;
      if (ch.choices[0]?.finish_reason) finish = ch.choices[0].finish_reason;
      if (ch.usage) usage = ch.usage;
    }
    expect(text).toBe(full.choices[0].message.content!);
    expect(finish).toBe(full.choices[0].finish_reason);
    expect(usage!.completion_tokens).toBe(full.usage!.completion_tokens);
  });

  test("SDK completions, streaming and not, agree; token-id prompts work", async () => {
    const r = await client.completions.create({ model: "m", prompt: "Once upon a time", max_tokens: 6, temperature: 0 });
    expect(r.object).toBe("text_completion");
    let text = "";
    for await (const ch of await client.completions.create({ model: "m", prompt: "Once upon a time", max_tokens: 6, temperature: 0, stream: true })) text += ch.choices[0]?.text ?? "";
    expect(text).toBe(r.choices[0].text);
    const ids = await client.completions.create({ model: "m", prompt: [20, 30, 40], max_tokens: 3, temperature: 0 });
    expect(ids.usage!.prompt_tokens).toBe(3);
  });

  test("raw SSE: data lines of chat.completion.chunk, finish_reason on the last, then [DONE]", async () => {
    const res = await post(s.url, "/v1/chat/completions", { messages: msgs, max_tokens: 5, temperature: 0, stream: true }, auth);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const data = sseData(await res.text());
    expect(data.at(-1)).toBe("[DONE]");
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    for (const c of chunks) expect(c.object).toBe("chat.completion.chunk");
    expect(chunks[0].choices[0].delta.role).toBe("assistant");
    expect(chunks.at(-1).choices[0].finish_reason).toBe("length");
    expect(chunks.slice(0, -1).every((c) => c.choices[0].finish_reason === null)).toBe(true);
  });

  test("prefix reuse: the same prompt again reports all but the last prompt token as cached, with the same bits", async () => {
    const body = { model: "m", messages: [{ role: "user" as const, content: "A prompt for the prefix cache." }], max_tokens: 4, temperature: 0,
      logprobs: true, top_logprobs: 3 };
    const a = await client.chat.completions.create(body);
    const b = await client.chat.completions.create(body);
    expect(b.usage!.prompt_tokens_details!.cached_tokens).toBe(b.usage!.prompt_tokens - 1);
    expect(b.choices[0].message.content).toBe(a.choices[0].message.content);
    // the default attention form is fixed (absorbed), so the re-fed last prompt token and the fresh prefill
    // that computed it inside a chunk give the same logits, bit for bit
    expect(b.choices[0].logprobs).toEqual(a.choices[0].logprobs);
  });

  test("logprobs: one entry per token, top_logprobs sorted, greedy picks the top one", async () => {
    const r = await client.chat.completions.create({ model: "m", messages: msgs, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3 });
    const lp = r.choices[0].logprobs!.content!;
    expect(lp).toHaveLength(r.usage!.completion_tokens);
    for (const e of lp) {
      expect(e.top_logprobs).toHaveLength(3);
      expect(e.logprob).toBeLessThanOrEqual(0);
      expect(e.top_logprobs[0].logprob).toBeGreaterThanOrEqual(e.top_logprobs[1].logprob);
      expect(e.logprob).toBe(e.top_logprobs[0].logprob);
    }
    const c = await client.completions.create({ model: "m", prompt: "abc", max_tokens: 4, temperature: 0, logprobs: 2 });
    expect(c.choices[0].logprobs!.token_logprobs).toHaveLength(c.usage!.completion_tokens);
  });

  test("stop strings cut the text before the first match with finish_reason stop", async () => {
    const base = { model: "m", prompt: "The quick brown fox", max_tokens: 16, temperature: 0 };
    const full = (await client.completions.create(base)).choices[0].text;
    expect(full.length).toBeGreaterThan(4);
    const stop = full.slice(2, 4);
    const r = await client.completions.create({ ...base, stop: [stop] });
    expect(r.choices[0].text).toBe(full.slice(0, full.indexOf(stop)));
    expect(r.choices[0].finish_reason).toBe("stop");
  });

  test("thinking: reasoning_content is present (a string) when enable_thinking is on", async () => {
    const res = await post(s.url, "/v1/chat/completions", { messages: msgs, max_tokens: 4, temperature: 0, chat_template_kwargs: { enable_thinking: true } }, auth);
    const j = await res.json() as any;
    expect(res.status).toBe(200);
    expect(typeof j.choices[0].message.reasoning_content).toBe("string");
  });

  const bad: [string, unknown, string | null][] = [
    ["n = 17", { messages: msgs, n: 17 }, "n"],
    ["n = 2 with a pinned slot", { messages: msgs, n: 2, slot: 0 }, "n"],
    ["temperature 101", { messages: msgs, temperature: 101 }, "temperature"],
    ["use_beam_search", { messages: msgs, use_beam_search: true }, "use_beam_search"],
    ["top_p 0", { messages: msgs, top_p: 0 }, "top_p"],
    ["no messages", { model: "m" }, "messages"],
    ["empty messages", { messages: [] }, "messages"],
    ["bad role", { messages: [{ role: "wizard", content: "x" }] }, "messages.0.role"],
    ["max_tokens 0", { messages: msgs, max_tokens: 0 }, "max_tokens"],
    ["max_tokens 1.5", { messages: msgs, max_tokens: 1.5 }, "max_tokens"],
    ["empty stop string", { messages: msgs, stop: [""] }, "stop"],
    ["json_schema without a name", { messages: msgs, response_format: { type: "json_schema", json_schema: {} } }, "response_format.json_schema.name"],
    ["tools", { messages: msgs, tools: [{ type: "function" }] }, "tools"],
    ["top_logprobs without logprobs", { messages: msgs, top_logprobs: 2 }, "top_logprobs"],
    ["presence_penalty 3", { messages: msgs, presence_penalty: 3 }, "presence_penalty"],
    ["an image part (text only)", { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:," } }] }] }, "messages.0.content.0.type"],
    ["content a number", { messages: [{ role: "user", content: 5 }] }, "messages.0.content"],
    ["legacy functions", { messages: msgs, functions: [{ name: "f", parameters: { type: "object" } }] }, "functions"],
    ["legacy function_call", { messages: msgs, function_call: { name: "f" } }, "function_call"],
    ["array body", [1, 2], null],
  ];
  for (const [what, body, param] of bad) {
    test(`400 naming the field: ${what}`, async () => {
      const res = await post(s.url, "/v1/chat/completions", body, auth);
      expect(res.status).toBe(400);
      const j = await res.json() as any;
      expect(j.error.type).toBe("invalid_request_error");
      expect(typeof j.error.message).toBe("string");
      if (param) expect(j.error.param).toStartWith(param);
      expect(j.error.message).not.toMatch(/: Invalid input$/); // (a union's error says what was wrong)
    });
  }

  test("top_k -1 is vLLM's \"all tokens\", as 0 (on /completion as llama.cpp reads it)", async () => {
    const text = async (path: string, extra: object) => ((await (await post(s.url, path, { prompt: "Once upon", max_tokens: 8, n_predict: 8, temperature: 1, seed: 5, ...extra }, auth)).json()) as any);
    const a = await text("/v1/completions", { top_k: -1 }), b = await text("/v1/completions", { top_k: 0 }), c = await text("/v1/completions", { top_k: 1 });
    expect(a.choices[0].text).toBe(b.choices[0].text);
    expect(a.choices[0].text).not.toBe(c.choices[0].text); // (the seed draws away from greedy here)
    expect((await text("/completion", { top_k: -1 })).content).toBe((await text("/completion", { top_k: 0 })).content);
  });

  test("X-Request-Id on every response: the client's when given (and well formed), else a new one; SSE and 401 too", async () => {
    const body = { messages: [{ role: "user", content: "hi" }], max_tokens: 2 };
    const given = await post(s.url, "/v1/chat/completions", body, { ...auth, "x-request-id": "trace-42_a=" });
    expect(given.headers.get("x-request-id")).toBe("trace-42_a=");
    const fresh = await post(s.url, "/v1/chat/completions", body, auth), again = await post(s.url, "/v1/chat/completions", body, auth);
    expect(fresh.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(again.headers.get("x-request-id")).not.toBe(fresh.headers.get("x-request-id"));
    expect((await post(s.url, "/v1/chat/completions", body, { ...auth, "x-request-id": "no spaces please" })).headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const sse = await post(s.url, "/v1/chat/completions", { ...body, stream: true }, { ...auth, "x-request-id": "sse-1" });
    expect(sse.headers.get("x-request-id")).toBe("sse-1");
    await sse.text();
    const denied = await post(s.url, "/v1/chat/completions", body, { "x-request-id": "no-key" });
    expect([denied.status, denied.headers.get("x-request-id")]).toEqual([401, "no-key"]);
    expect((await fetch(`${s.url}/health`, { headers: { "x-request-id": "h" } })).headers.get("x-request-id")).toBe("h");
  });

  test("malformed JSON → 400 invalid_json; oversized body → 413; empty prompt / bad ids → 400", async () => {
    const m = await post(s.url, "/v1/chat/completions", "{not json", auth);
    expect(m.status).toBe(400);
    expect((await m.json() as any).error.code).toBe("invalid_json");
    const big = await post(s.url, "/v1/completions", { prompt: "x".repeat(5000) }, auth);
    expect(big.status).toBe(413);
    const chunked = await fetch(`${s.url}/v1/completions`, {
      method: "POST", headers: { ...auth, "content-type": "application/json" },
      body: new ReadableStream({ start(c) { c.enqueue(new Uint8Array(3000)); c.enqueue(new Uint8Array(3000)); c.close(); } }),
    });
    expect(chunked.status).toBe(413);
    const empty = await post(s.url, "/v1/completions", { prompt: "" }, auth);
    expect(empty.status).toBe(400);
    expect((await empty.json() as any).error.code).toBe("empty_prompt");
    const ids = await post(s.url, "/v1/completions", { prompt: [1, 99999] }, auth);
    expect(ids.status).toBe(400);
    expect((await ids.json() as any).error.param).toBe("prompt");
  });

  test("auth: 401 without or with a wrong key, /health stays open; unknown route 404 in error shape", async () => {
    const no = await fetch(`${s.url}/v1/models`);
    expect(no.status).toBe(401);
    expect((await no.json() as any).error.type).toBe("authentication_error");
    expect((await fetch(`${s.url}/v1/models`, { headers: { authorization: "Bearer nope" } })).status).toBe(401);
    expect((await fetch(`${s.url}/health`)).status).toBe(200);
    // several keys, comma-separated (llama-server's): each opens, their list does not
    const multi = await startTiny({ slots: 1, apiKey: "k1,k2" });
    try {
      const st = async (key: string) => (await fetch(`${multi.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status;
      expect([await st("k1"), await st("k2"), await st("k1,k2"), await st("k3")]).toEqual([200, 200, 401, 401]);
    } finally { await multi.stop(); }
    for (const p of ["/ping", "/v1/health"]) // vLLM's and llama-server's aliases, open like /health
      expect(await (await fetch(`${s.url}${p}`)).json()).toEqual({ status: "ok" });
    // llama-server's unversioned aliases answer as the /v1 routes do (and need the key like them)
    expect((await fetch(`${s.url}/models`)).status).toBe(401);
    expect(await (await fetch(`${s.url}/models`, { headers: auth })).json()).toEqual(await (await fetch(`${s.url}/v1/models`, { headers: auth })).json());
    const created = ((await (await fetch(`${s.url}/v1/models`, { headers: auth })).json()) as any).data[0].created; // (when the server started)
    expect(created).toBeLessThanOrEqual(Date.now() / 1000);
    expect(created).toBeGreaterThan(Date.now() / 1000 - 3600);
    for (const [p, body] of [["/completions", { prompt: "Hi", max_tokens: 3, temperature: 0 }],
      ["/chat/completions", { messages: [{ role: "user", content: "Hi" }], max_tokens: 3, temperature: 0 }]] as const) {
      const a = await (await post(s.url, p, body, auth)).json() as any, b = await (await post(s.url, `/v1${p}`, body, auth)).json() as any;
      expect(a.choices[0]).toEqual(b.choices[0]);
      expect(a.object).toBe(b.object);
    }
    const nf = await fetch(`${s.url}/v2/nothing`, { headers: auth });
    expect(nf.status).toBe(404);
    expect((await nf.json() as any).error.code).toBe("not_found");
    const opt = await fetch(`${s.url}/v1/chat/completions`, { method: "OPTIONS", headers: { ...auth, origin: "http://evil.example" } });
    expect(opt.headers.get("access-control-allow-origin")).toBeNull();
  });

  test("/v1/models, /metrics and /slots", async () => {
    const models = await (await fetch(`${s.url}/v1/models`, { headers: auth })).json() as any;
    expect(models.data[0].id).toBe("glm-tiny");
    const one = await fetch(`${s.url}/v1/models/glm-tiny`, { headers: auth });
    expect(await one.json()).toEqual(models.data[0]);
    const other = await fetch(`${s.url}/v1/models/org/other-model`, { headers: auth });
    expect(other.status).toBe(404);
    expect(((await other.json()) as any).error).toMatchObject({ code: "model_not_found", param: "model" });
    const metrics = await (await fetch(`${s.url}/metrics`, { headers: auth })).text();
    for (const name of ["requests_total", "prompt_tokens_total", "generated_tokens_total", "decode_tokens_per_second", "queue_depth", "slots_busy"]) {
      expect(metrics).toMatch(new RegExp(`^hummingbird_${name} \\d`, "m"));
    }
    expect(Number(/^hummingbird_generated_tokens_total (\d+)/m.exec(metrics)![1])).toBeGreaterThan(0);
    // latency histograms: cumulative buckets ending at +Inf = _count, a positive _sum, as many ends as finished requests
    for (const h of ["time_to_first_token_seconds", "request_latency_seconds"]) {
      const buckets = [...metrics.matchAll(new RegExp(`^hummingbird_${h}_bucket\\{le="([^"]+)"\\} (\\d+)$`, "gm"))].map((m) => Number(m[2]));
      expect(buckets.length).toBe(14);
      for (let i = 1; i < buckets.length; i++) expect(buckets[i]).toBeGreaterThanOrEqual(buckets[i - 1]);
      const count = Number(new RegExp(`^hummingbird_${h}_count (\\d+)$`, "m").exec(metrics)![1]);
      expect(buckets.at(-1)).toBe(count);
      expect(count).toBeGreaterThan(0);
      expect(Number(new RegExp(`^hummingbird_${h}_sum (\\S+)$`, "m").exec(metrics)![1])).toBeGreaterThan(0);
    }
    expect(Number(/^hummingbird_request_latency_seconds_count (\d+)/m.exec(metrics)![1]))
      .toBe(Number(/^hummingbird_requests_finished_total (\d+)/m.exec(metrics)![1]));
    // the exposition format line by line, and vLLM's / llama-server's names carrying the same figures
    for (const line of metrics.trimEnd().split("\n"))
      expect(line).toMatch(/^(# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+|[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_]+="[^"\n]*"(,[a-zA-Z_]+="[^"\n]*")*\})? -?[0-9.e+-]+)$/);
    const val = (re: string) => Number(new RegExp(`^${re} (\\S+)$`, "m").exec(metrics)![1]);
    expect(val('vllm:generation_tokens_total\\{model_name="glm-tiny"\\}')).toBe(val("hummingbird_generated_tokens_total"));
    expect(["stop", "length", "abort"].reduce((a, r) => a + val(`vllm:request_success_total\\{model_name="glm-tiny",finished_reason="${r}"\\}`), 0))
      .toBe(val("hummingbird_requests_finished_total")); // (vLLM's finished_reason label)
    expect(val('vllm:kv_cache_usage_perc\\{model_name="glm-tiny"\\}')).toBe(0); // (idle: kept conversations are free, as vLLM's cached blocks)
    expect(val('vllm:time_to_first_token_seconds_count\\{model_name="glm-tiny"\\}')).toBe(val("hummingbird_time_to_first_token_seconds_count"));
    expect(val("llamacpp:tokens_predicted_total")).toBe(val("hummingbird_generated_tokens_total"));
    expect(val("llamacpp:kv_cache_tokens")).toBeGreaterThan(0); // (the finished requests' rows stay in their slots)
    expect(val("llamacpp:kv_cache_usage_ratio")).toBeGreaterThan(0);
    const slots = await (await fetch(`${s.url}/slots`, { headers: auth })).json() as any;
    expect(slots.slots).toHaveLength(2);
    expect(slots.slots[0]).toHaveProperty("state");
  });
});

describe.skipIf(!hasTiny)("serve: limits", () => {
  test("context limit → 400 context_length_exceeded; a full queue → 429", async () => {
    const s = await startTiny({ slots: 1, queue: 1, ctx: 1024 });
    try {
      const long = await post(s.url, "/v1/completions", { prompt: Array.from({ length: 1030 }, (_, i) => 20 + (i % 400)) });
      expect(long.status).toBe(400);
      expect((await long.json() as any).error.code).toBe("context_length_exceeded");
      const ac = new AbortController();
      const body = JSON.stringify({ prompt: [20, 21], max_tokens: 1000, temperature: 0, stream: true });
      // one runs, one waits (queue 1), the third is refused; the waiting one answers once admitted
      const res = await Promise.all([0, 1, 2].map(() => fetch(`${s.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body, signal: ac.signal })));
      expect(res.map((r) => r.status).sort()).toEqual([200, 200, 429]);
      const full = res.find((r) => r.status === 429)!;
      expect(full.headers.get("retry-after")).toBe("1"); // (the OpenAI SDKs wait that long before their retry)
      expect((await full.json() as any).error.code).toBe("overloaded");
      // llama-server's /slots?fail_on_no_slot=1: 503 while the one slot is busy, 200 once it is free again
      const noSlot = await fetch(`${s.url}/slots?fail_on_no_slot=1`);
      expect(noSlot.status).toBe(503);
      expect((await noSlot.json() as any).error).toMatchObject({ code: "no_slot_available", type: "unavailable_error" });
      expect((await fetch(`${s.url}/slots`)).status).toBe(200);
      ac.abort();
      let free = 0;
      for (let i = 0; i < 100 && free !== 200; i++) { await Bun.sleep(20); free = (await fetch(`${s.url}/slots?fail_on_no_slot=1`)).status; }
      expect(free).toBe(200);
    } finally {
      await s.stop();
    }
  });
});

describe.skipIf(!hasTiny)("serve: CLI", () => {
  test("`hummingbird serve --port 0` names the model, answers /health, exits 0 on SIGTERM", async () => {
    const p = Bun.spawn(["bun", `${import.meta.dir}/../src/cli.ts`, "serve", "--model", TINY, "--port", "0", "--slots", "1"], { stdout: "pipe", stderr: "pipe" });
    const kill = setTimeout(() => p.kill("SIGKILL"), 30000);
    try {
      const rd = p.stderr.getReader();
      let err = "";
      while (!/ready on (http:\S+)/.test(err)) {
        const { value, done } = await rd.read();
        if (done) throw new Error(`serve exited early:\n${err}`);
        err += new TextDecoder().decode(value);
      }
      expect(err).toContain(`SERVING MODEL ${TINY}`);
      const url = /ready on (http:\S+)/.exec(err)![1];
      expect(url).toStartWith("http://127.0.0.1:");
      expect((await fetch(`${url}/health`)).status).toBe(200);
      p.kill("SIGTERM");
      expect(await p.exited).toBe(0);
    } finally {
      clearTimeout(kill);
      p.kill("SIGKILL");
    }
  }, 40000);

  test("bad flags exit 2 with a message", async () => {
    const p = Bun.spawn(["bun", `${import.meta.dir}/../src/cli.ts`, "serve", "--slots", "0", "--model", TINY], { stdout: "pipe", stderr: "pipe" });
    expect(await p.exited).toBe(2);
    expect(await new Response(p.stderr).text()).toContain("--slots must be in [1, 256]");
    const q = Bun.spawn(["bun", `${import.meta.dir}/../src/cli.ts`, "serve", "--prefill-chunk", "0", "--model", TINY], { stdout: "pipe", stderr: "pipe" });
    expect(await q.exited).toBe(2);
    expect(await new Response(q.stderr).text()).toContain("--prefill-chunk must be in [1, 65536]");
    for (const [args, msg] of [[["--draft", "eagle"], "--draft"], [["--draft-len", "3"], "--draft-len needs --draft ngram or mtp"], [["--draft", "ngram", "--draft-len", "0"], "--draft-len must be in [1, 16]"]] as const) {
      const r = Bun.spawn(["bun", `${import.meta.dir}/../src/cli.ts`, "serve", ...args, "--model", TINY], { stdout: "pipe", stderr: "pipe" });
      expect(await r.exited).toBe(2);
      expect(await new Response(r.stderr).text()).toContain(msg);
    }
  }, 20000);
});
