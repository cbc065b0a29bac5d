import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { round } from '../measure/latency.js';
import { type LoadResult, runLoad, sumCounts, type Target } from '../measure/load.js';
import { type CpuUse, weightedCpu } from '../measure/proc.js';
import { warmupSeconds } from '../scenarios.js';
import { concurrency, halfSeconds, progress } from './settings.js';

export interface GatewaySummary {
  rps: number;
  requests: number;
  /** The worse of the two halves. */
  latencyMs: { p50: number; p99: number };
  non2xx: number;
  errors: number;
  statusCodes: Record<string, number>;
  cpu: CpuUse;
}

/** Two halves of one load: req/s over both, the worse half's latencies. */
function mergeLoads(results: LoadResult[]): GatewaySummary {
  const ok = results.reduce((sum, r) => sum + (r.requests - r.non2xx), 0);
  const seconds = results.reduce((sum, r) => sum + r.durationSeconds, 0);
  return {
    rps: seconds > 0 ? Math.round(ok / seconds) : 0,
    requests: results.reduce((sum, r) => sum + r.requests, 0),
    latencyMs: { p50: Math.max(...results.map((r) => r.latencyMs.p50)), p99: Math.max(...results.map((r) => r.latencyMs.p99)) },
    non2xx: results.reduce((sum, r) => sum + r.non2xx, 0),
    errors: results.reduce((sum, r) => sum + r.errors + r.timeouts, 0),
    statusCodes: sumCounts(results.map((r) => r.statusCodes)),
    cpu: weightedCpu(results.map((r) => ({ cpu: r.cpu, seconds: r.durationSeconds }))),
  };
}

/** One request that must answer 200 before any load is sent. */
async function expectOk(target: Target): Promise<void> {
  const response = await fetch(target.url, { method: target.method ?? 'GET', headers: target.headers, signal: AbortSignal.timeout(10_000) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${target.method ?? 'GET'} ${target.url} answered ${response.status}: ${text.slice(0, 500)}`);
}

/**
 * GET /v1/account through the gateway with an access token and with an API key, interleaved JWT,
 * key, key, JWT, `halfSeconds` each (each credential's first half after a warm-up).
 */
export async function compareCredentials(mesh: Mesh, accessToken: string, fullKey: string) {
  const account = `${mesh.gatewayUrl}/v1/account`;
  const jwtTarget: Target = { url: account, headers: { authorization: `Bearer ${accessToken}` } };
  const keyTarget: Target = { url: account, headers: { authorization: `Bearer ${fullKey}` } };
  await expectOk(jwtTarget);
  await expectOk(keyTarget);
  const watch = async () => ({ gateway: [mesh.pid('gateway')], identity: [mesh.pid('identity')], keys: [mesh.pid('keys')] });
  const shape = (warmup: number) => ({ connections: concurrency, durationSeconds: halfSeconds, warmupSeconds: warmup });
  progress(`gateway GET /v1/account: access token, API key (each after ${warmupSeconds} s warm-up), API key, access token, ${halfSeconds} s each`);
  const jwt1 = await runLoad(jwtTarget, shape(warmupSeconds), watch);
  const key1 = await runLoad(keyTarget, shape(warmupSeconds), watch);
  const key2 = await runLoad(keyTarget, shape(0), watch);
  const jwt2 = await runLoad(jwtTarget, shape(0), watch);
  const gateway = { jwt: mergeLoads([jwt1, jwt2]), key: mergeLoads([key1, key2]) };
  return { ...gateway, ratio: gateway.jwt.rps > 0 ? round(gateway.key.rps / gateway.jwt.rps, 3) : 0 };
}

export type CredentialComparison = Awaited<ReturnType<typeof compareCredentials>>;
