import type { Mesh } from '@switchboard/runtime/dev/mesh';
import type pg from 'pg';
import { round } from '../measure/latency.js';
import { type CpuWatch, type LoadResult, runLoad, sumCounts, type Target } from '../measure/load.js';
import { postgresBackends } from '../measure/postgres.js';
import type { CpuUse } from '../measure/proc.js';
import type { BenchSession } from '../measure/session.js';
import { durationSeconds, warmupSeconds } from '../scenarios.js';
import type { Prepared } from './gateway-calls.js';
import { connections, content, conversations, listLimit, listMessages } from './settings.js';

export interface LoadSummary {
  /** How many autocannon instances ran together (one per conversation). */
  parts: number;
  connections: number;
  durationSeconds: number;
  requests: number;
  /** 2xx per second, summed over the parts. */
  rps: number;
  /** One part: its own; several: the worst part's. */
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  cpu: CpuUse;
}

/** The parts of one load, run at the same time: rates add up, the latencies are the worst part's. */
function merge(results: LoadResult[]): LoadSummary {
  const worst = (pick: (r: LoadResult) => number) => Math.max(...results.map(pick));
  return {
    parts: results.length,
    connections: results.reduce((sum, r) => sum + r.connections, 0),
    durationSeconds: round(worst((r) => r.durationSeconds)),
    requests: results.reduce((sum, r) => sum + r.requests, 0),
    rps: results.reduce((sum, r) => sum + r.rps, 0),
    latencyMs: {
      p50: worst((r) => r.latencyMs.p50),
      p90: worst((r) => r.latencyMs.p90),
      p99: worst((r) => r.latencyMs.p99),
      max: worst((r) => r.latencyMs.max),
    },
    non2xx: results.reduce((sum, r) => sum + r.non2xx, 0),
    errors: results.reduce((sum, r) => sum + r.errors, 0),
    timeouts: results.reduce((sum, r) => sum + r.timeouts, 0),
    statusCodes: sumCounts(results.map((r) => r.statusCodes)),
    // The first part measured the watched processes (the others only the load generator, the same process).
    cpu: results[0].cpu,
  };
}

/**
 * The three loads through the gateway: appends to one conversation, appends to every
 * conversation at once (one autocannon each, run together), and the listing.
 */
export async function runLoads(session: BenchSession, mesh: Mesh, db: pg.Client, token: string, prepared: Prepared) {
  const auth = { authorization: `Bearer ${token}` };
  const appendTarget = (id: string): Target => ({
    url: `${mesh.gatewayUrl}/v1/conversations/${id}/messages`,
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ role: 'user', content }),
  });
  const listTarget: Target = { url: `${mesh.gatewayUrl}/v1/conversations/${prepared.listed}/messages?limit=${listLimit}`, method: 'GET', headers: auth };
  const watch: CpuWatch = async () => ({
    gateway: [mesh.pid('gateway')],
    conversations: [mesh.pid('conversations')],
    identity: [mesh.pid('identity')],
    postgres: await postgresBackends(mesh.env.DATABASE_URL, db),
  });
  const shape = { connections, durationSeconds, warmupSeconds };

  session.progress(`append to 1 conversation: ${connections} connections, ${warmupSeconds} s warm-up, ${durationSeconds} s`);
  const one = merge([await runLoad(appendTarget(prepared.appendTo[0]), shape, watch)]);

  const perConversation = Math.max(1, Math.floor(connections / conversations));
  session.progress(`append to ${conversations} conversations: ${perConversation} connections each, ${warmupSeconds} s warm-up, ${durationSeconds} s`);
  const many = merge(
    await Promise.all(prepared.appendTo.map((id, i) => runLoad(appendTarget(id), { ...shape, connections: perConversation }, i === 0 ? watch : undefined))),
  );

  session.progress(`list ${listLimit} of ${listMessages} messages: ${connections} connections, ${warmupSeconds} s warm-up, ${durationSeconds} s`);
  const list = merge([await runLoad(listTarget, shape, watch)]);
  return { one, many, list, perConversation };
}

export type Loads = Awaited<ReturnType<typeof runLoads>>;
