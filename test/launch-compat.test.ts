// llama-server's and vLLM's launch flags (src/cli/launch-compat.ts): the multi-letter short flags rewritten before
// parsing, the mapped options and the refusals; on a live server (glm-tiny fixture) --seed's reproducible sampling
// and -n's default max tokens; and a llama-server launch line through `serve` itself.
import { afterAll, describe, expect, test } from "bun:test";
import { applyLaunch, launchOptions, rewriteLaunchArgs } from "../src/cli/launch-compat.ts";
import type { Server } from "../src/server/server.ts";
import { hasTiny, TINY } from "./helpers/fixture.ts";
import { post, spawnServe, startTiny } from "./server.helpers.ts";

describe("launch flags", () => {
  test("rewritten: -ngl, -np, -fa [value], -ctk / -ctv, -cb, -tp; negative numbers joined to numeric flags; nothing after --", () => {
    expect(rewriteLaunchArgs(["-ngl", "99", "-np", "4", "-fa", "-c", "4096", "-fa", "off", "-ctk", "q8_0", "-ctv", "q8_0", "-cb", "-tp", "1",
      "-n", "-1", "--seed", "-5", "--", "-ngl"])).toEqual(["--n-gpu-layers", "99", "--parallel", "4", "--flash-attn=on", "-c", "4096",
      "--flash-attn=off", "--cache-type-k", "q8_0", "--cache-type-v", "q8_0", "--cont-batching", "--tensor-parallel-size", "1",
      "--n-predict=-1", "--seed=-5", "--", "-ngl"]);
  });

  test("llama-cli's rewrite (generate, chat) leaves -n and negative numbers alone", () => {
    expect(rewriteLaunchArgs(["-n", "-1", "-ngl", "99", "-fa", "-ctk", "f16"], false))
      .toEqual(["-n", "-1", "--n-gpu-layers", "99", "--flash-attn=on", "--cache-type-k", "f16"]);
  });

  test("applyLaunch writes -ngl / -ctk into the command's own flags, refusing contradictions", () => {
    const v: Record<string, string | boolean | undefined> = { "n-gpu-layers": "3", "cache-type-k": "q8_0" };
    applyLaunch(v, launchOptions(v, ""), "");
    expect([v["device-layers"], v.device, v["kv-cache-dtype"]]).toEqual(["3", undefined, "q8"]);
    const w: Record<string, string | boolean | undefined> = { "n-gpu-layers": "0" };
    applyLaunch(w, launchOptions(w, ""), "");
    expect(w.device).toBe("cpu");
    for (const [x, msg] of [[{ "n-gpu-layers": "0", device: "vulkan" }, /not with --device vulkan/], [{ "n-gpu-layers": "2", "device-layers": "2" }, /not both/],
      [{ "cache-type-k": "f16", "kv-cache-dtype": "q8" }, /disagree/]] as const) {
      const y = { ...x } as Record<string, string | boolean | undefined>;
      expect(() => applyLaunch(y, launchOptions(y, ""), "")).toThrow(msg);
    }
  });

  test("mapped options and refusals naming the flag", () => {
    expect(launchOptions({ "n-gpu-layers": "99", "cache-type-k": "q8_0", "n-predict": "64", seed: "7", "disable-log-requests": true }, ""))
      .toEqual({ deviceLayers: 99, cpuOnly: false, kvDtype: "q8", maxTokens: 64, seed: 7, logRequests: false });
    expect(launchOptions({ "n-gpu-layers": "0", "cache-type-v": "f16", "n-predict": "-1" }, "")).toEqual({ cpuOnly: true, kvDtype: "f16", logRequests: true });
    expect(launchOptions({ "gpu-layers": "all", dtype: "bfloat16", "tensor-parallel-size": "1", "flash-attn": "auto" }, "").deviceLayers).toBeGreaterThan(1e6);
    for (const [v, msg] of [[{ "cache-type-k": "q8_0", "cache-type-v": "f16" }, /must agree/], [{ "cache-type-k": "q4_0" }, /--cache-type-k must be one of/],
      [{ dtype: "float16" }, /--dtype float16/], [{ "tensor-parallel-size": "2" }, /one process/], [{ "flash-attn": "maybe" }, /--flash-attn must be one of/],
      [{ "n-predict": "x" }, /--n-predict/], [{ "no-mmap": true, mmap: true }, /--mmap or --no-mmap/], [{ seed: "-3" }, /--seed/]] as const)
      expect(() => launchOptions(v as Record<string, string | boolean>, "")).toThrow(msg);
  });
});

describe.skipIf(!hasTiny)("launch flags on a server", () => {
  const servers: Server[] = [];
  afterAll(async () => { await Promise.all(servers.map((s) => s.stop())); });
  const sampled = async (s: Server) => {
    const out: string[] = [];
    for (const prompt of ["Once upon a time", "The cat"]) // (no seed in the requests)
      out.push(((await (await post(s.url, "/v1/completions", { prompt, max_tokens: 12, temperature: 1 })).json()) as any).choices[0].text);
    return out;
  };

  test("--seed N: fresh servers give unseeded requests the same draws; another N, others", async () => {
    const [a, b, c] = await Promise.all([startTiny({ slots: 1, seed: 7 }), startTiny({ slots: 1, seed: 7 }), startTiny({ slots: 1, seed: 8 })]);
    servers.push(a, b, c);
    const [x, y, z] = [await sampled(a), await sampled(b), await sampled(c)];
    expect(x).toEqual(y);
    expect(x).not.toEqual(z);
  });

  test("-n N: requests that name no max_tokens stop after N; one that names it gets what it asks", async () => {
    const s = await startTiny({ slots: 1, maxTokens: 5 });
    servers.push(s);
    const body = { messages: [{ role: "user", content: "Once upon a time" }], temperature: 0, ignore_eos: true }; // (chat: no default of its own)
    expect(((await (await post(s.url, "/v1/chat/completions", body)).json()) as any).usage.completion_tokens).toBe(5);
    expect(((await (await post(s.url, "/v1/chat/completions", { ...body, max_tokens: 9 })).json()) as any).usage.completion_tokens).toBe(9);
  });

  test("a llama-server launch line runs as written: -ngl -fa -ctk -ctv -np -n --no-mmap", async () => {
    const { p, url } = await spawnServe(["-m", TINY, "-ngl", "99", "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0", "-np", "2", "-n", "7",
      "--no-mmap", "--no-warmup", "--quiet", "--disable-log-stats"]);
    try {
      expect(((await (await fetch(`${url}/props`)).json()) as any).total_slots).toBe(2);
      const r = (await (await post(url, "/completion", { prompt: "Once upon a time", temperature: 0, ignore_eos: true })).json()) as any;
      expect(r.tokens_predicted).toBe(7);
    } finally { p.kill(); }
  }, 60_000);
});
