// The HAProxy configuration in front of `serve` replicas: what `hummingbird cluster` runs (or prints), and what
// deploy/haproxy.cfg ships (its 3-replica form, checked equal by test/deploy.test.ts). No state.

export interface Replica { host: string; port: number }
export interface BalancerOptions {
  bind: string;                         // the front's address:port, e.g. 127.0.0.1:8080
  replicas: Replica[];
  balance?: "affinity" | "roundrobin";  // affinity (default): consistent hashing on X-Session-Id
  checkMs?: number;                     // health check interval (default 1000); 2 failures take a replica out
}

/** The configuration text. Affinity: requests with the same X-Session-Id (or, without the header, the same JSON body
 *  `prompt_cache_key` or `user`, copied into the header first) land on the same replica; consistent hashing moves only
 *  a leaving replica's share. Retries: a refused connection, an empty response or a 503 (a draining or loading
 *  replica) is sent again to another replica, so that kill -9 or SIGTERM loses only what was mid-answer there. */
export function haproxyConfig(o: BalancerOptions): string {
  if (o.replicas.length === 0) throw new Error("haproxyConfig: no replicas");
  const inter = o.checkMs ?? 1000, affinity = (o.balance ?? "affinity") === "affinity";
  const key = (f: string) => `req.body,json_query('$.${f}')`;
  return [
    "# HAProxy in front of hummingbird serve replicas (written by src/cli/haproxy-config.ts; docs/serving.md).",
    "global",
    "    maxconn 4096",
    "",
    "defaults",
    "    mode http",
    "    timeout connect 2s",
    "    timeout client 10m        # streams may stay quiet through a long prefill",
    "    timeout server 10m",
    "    timeout http-request 30s",
    "    option http-buffer-request # (the body's session key, and retries, need the request buffered)",
    "    retries 3",
    "    option redispatch 1       # every retry goes to another replica",
    "    retry-on conn-failure empty-response 503",
    "",
    "frontend hummingbird",
    `    bind ${o.bind}`,
    ...(affinity ? [
      "    # the session key: X-Session-Id, else the body's prompt_cache_key, else its user (bodies within one buffer, 16 KiB)",
      `    http-request set-header X-Session-Id %[${key("prompt_cache_key")}] if !{ req.hdr(X-Session-Id) -m found } { ${key("prompt_cache_key")} -m found }`,
      `    http-request set-header X-Session-Id %[${key("user")}] if !{ req.hdr(X-Session-Id) -m found } { ${key("user")} -m found }`,
    ] : []),
    "    default_backend replicas",
    "",
    "backend replicas",
    affinity ? "    balance hdr(X-Session-Id)  # without the header: round robin" : "    balance roundrobin",
    ...(affinity ? ["    hash-type consistent"] : []),
    "    option httpchk              # GET /health: 503 while loading or draining",
    "    http-check send meth GET uri /health ver HTTP/1.1 hdr Host localhost",
    "    http-check expect status 200",
    "    http-response set-header X-Served-By %s",
    `    default-server check inter ${inter} fall 2 rise 2`,
    ...o.replicas.map((r, i) => `    server r${i + 1} ${r.host}:${r.port}`),
    "",
  ].join("\n");
}
