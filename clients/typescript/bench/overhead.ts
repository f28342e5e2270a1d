/**
 * What the client adds to a call: `facts()` against a bare `fetch` of the same request
 * (same URL, headers, JSON parsed), interleaved in rounds so both see the same machine.
 *
 * Against a local HTTP server answering a fixed list of facts by default (the client's cost
 * alone); against a real server with BENCH_BASE_URL and BENCH_API_KEY.
 * BENCH_CALLS (default 2000) calls per side per round, BENCH_ROUNDS (default 5) rounds.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

import { createClient } from "@sgam/client";

const calls = Number(process.env.BENCH_CALLS ?? 2000);
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);

const fact = {
  fact_id: "f1", version: 1, tenant_id: "t", agent_id: "default", purpose: "default", subject: "mira",
  attribute: "home_city", value: "Utrecht", cardinality: "one", kind: "attribute", schema_version: 1,
  valid_from: "2026-01-01T00:00:00Z", valid_to: null, recorded_at: "2026-01-01T00:00:00Z",
  superseded_at: null, supersedes_fact_id: null, source_episode_id: "e1", evidence: "my home city is Utrecht",
  confidence: 0.9, trust: "user_confirmed", status: "active", expires_at: null,
};
const body = JSON.stringify(Array.from({ length: 5 }, (_, index) => ({ ...fact, fact_id: `f${index}` })));

async function target(): Promise<{ baseUrl: string; apiKey: string; close: () => void }> {
  if (process.env.BENCH_BASE_URL) {
    return { baseUrl: process.env.BENCH_BASE_URL, apiKey: process.env.BENCH_API_KEY ?? "", close: () => {} };
  }
  const server = createServer((_, response) => {
    response.writeHead(200, { "Content-Type": "application/json", ETag: '"3"' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { baseUrl: `http://127.0.0.1:${port}`, apiKey: "sgam_bench", close: () => server.close() };
}

const { baseUrl, apiKey, close } = await target();
const client = createClient({ baseUrl, apiKey });
const url = `${baseUrl}/v1/subjects/mira/facts?attribute=home_city`;
const headers = { Authorization: `Bearer ${apiKey}` };

async function bare(): Promise<void> {
  const response = await fetch(url, { headers });
  if (!response.ok) throw new Error(`bare fetch: ${response.status}`);
  await response.json();
}

async function viaClient(): Promise<void> {
  await client.facts("mira", { attribute: "home_city" });
}

/** Milliseconds per call over `calls` calls, one after another. */
async function perCall(call: () => Promise<void>): Promise<number> {
  const started = performance.now();
  for (let index = 0; index < calls; index++) await call();
  return (performance.now() - started) / calls;
}

await perCall(bare); // warm both paths: connections, JIT
await perCall(viaClient);
const overheads: number[] = [];
for (let round = 0; round < rounds; round++) {
  const fetchMs = await perCall(bare);
  const clientMs = await perCall(viaClient);
  overheads.push(clientMs - fetchMs);
  console.log(`round ${round + 1}: fetch ${fetchMs.toFixed(4)} ms, client ${clientMs.toFixed(4)} ms per call`);
}
close();
overheads.sort((a, b) => a - b);
const median = overheads[Math.floor(overheads.length / 2)]!;
console.log(`client overhead: median ${median.toFixed(4)} ms per call over ${rounds} rounds of ${calls}`);
console.log(JSON.stringify({ overhead_ms: median, calls, rounds, against: process.env.BENCH_BASE_URL ? "server" : "local" }));
