/**
 * What the client adds to a call: `facts()` against a bare `fetch` of the same request
 * (same URL, headers, JSON parsed), interleaved in rounds so both see the same machine.
 *
 * Against a local HTTP server answering a fixed list of facts by default (the client's cost
 * alone); against a real server with BENCH_BASE_URL and BENCH_API_KEY.
 * BENCH_CALLS (default 2000) calls per side per round, BENCH_ROUNDS (default 5) rounds.
 * Wall time and this process's CPU time per call: on a busy machine the wall clock carries
 * the other processes' share, the CPU time (the client's work, plus the local server's, the
 * same for both sides) much less of it.
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

/** Wall and CPU milliseconds per call over `calls` calls, one after another. */
async function perCall(call: () => Promise<void>): Promise<{ wall: number; cpu: number }> {
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  for (let index = 0; index < calls; index++) await call();
  const wall = (performance.now() - started) / calls;
  const used = process.cpuUsage(cpuBefore);
  return { wall, cpu: (used.user + used.system) / 1000 / calls };
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

await perCall(bare); // warm both paths: connections, JIT
await perCall(viaClient);
const wallOver: number[] = [];
const cpuOver: number[] = [];
for (let round = 0; round < rounds; round++) {
  const plain = await perCall(bare);
  const typed = await perCall(viaClient);
  wallOver.push(typed.wall - plain.wall);
  cpuOver.push(typed.cpu - plain.cpu);
  const ms = (value: number) => value.toFixed(4);
  console.log(
    `round ${round + 1}: fetch ${ms(plain.wall)} ms (cpu ${ms(plain.cpu)}), client ${ms(typed.wall)} ms (cpu ${ms(typed.cpu)}) per call`,
  );
}
close();
const wall = median(wallOver);
const cpu = median(cpuOver);
console.log(`client overhead, median of ${rounds} rounds of ${calls}: ${wall.toFixed(4)} ms wall, ${cpu.toFixed(4)} ms cpu per call`);
console.log(JSON.stringify({ overhead_wall_ms: wall, overhead_cpu_ms: cpu, calls, rounds, against: process.env.BENCH_BASE_URL ? "server" : "local" }));
