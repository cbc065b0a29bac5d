import autocannon from 'autocannon';
import { type CpuUse, cpuMeter } from './proc.js';

/** One HTTP request to send over and over. */
export interface Target {
  url: string;
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  headers?: Record<string, string>;
  body?: string;
}

export interface LoadShape {
  connections: number;
  /** Seconds of measured load. */
  durationSeconds: number;
  /** Seconds of load before the measurement, thrown away (JIT, pools, caches). */
  warmupSeconds: number;
}

export interface LoadResult {
  url: string;
  connections: number;
  durationSeconds: number;
  requests: number;
  /** 2xx responses per second over the measured run: what the ratios use. */
  rps: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  /** CPU use during the measured run (not the warm-up). */
  cpu: CpuUse;
}

/** A hard cap on the requests of one run, whatever the duration: loops are bounded in count too. */
const maxRequestsPerRun = 5_000_000;

function fire(target: Target, connections: number, durationSeconds: number): Promise<autocannon.Result> {
  const url = new URL(target.url);
  if (url.hostname !== '127.0.0.1') throw new Error(`refusing to send load to ${url.host}: only 127.0.0.1 is allowed`);
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url: target.url,
        method: target.method ?? 'GET',
        headers: target.headers,
        body: target.body,
        connections,
        duration: durationSeconds,
        maxOverallRequests: maxRequestsPerRun,
        timeout: 10,
      },
      (err, result) => (err ? reject(err) : resolve(result)),
    );
  });
}

/** Groups of processes whose CPU use to measure, asked for after the warm-up (pools are full then). */
export type CpuWatch = () => Promise<Record<string, Array<number | undefined>>>;

/**
 * Warms up, then measures `shape.durationSeconds` of load on `target`, and the CPU the `watch`ed
 * processes use meanwhile (the load generator is this process).
 */
export async function runLoad(target: Target, shape: LoadShape, watch: CpuWatch = async () => ({})): Promise<LoadResult> {
  if (shape.warmupSeconds > 0) await fire(target, shape.connections, shape.warmupSeconds);
  const stopMeter = cpuMeter({ ...(await watch()), 'load generator': [process.pid] });
  const result = await fire(target, shape.connections, shape.durationSeconds);
  const cpu = stopMeter();
  const statusCodes = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, stats]) => [code, stats.count]));
  const ok = result['2xx'];
  return {
    url: target.url,
    connections: shape.connections,
    durationSeconds: result.duration,
    requests: ok + result.non2xx,
    rps: Math.round(ok / result.duration),
    latencyMs: {
      p50: result.latency.p50,
      p90: result.latency.p90,
      p99: result.latency.p99,
      max: result.latency.max,
      mean: Math.round(result.latency.mean * 100) / 100,
    },
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    cpu,
  };
}

/** Counts by key (status codes, failures) added up over several runs. */
export function sumCounts(records: Array<Record<string, number>>): Record<string, number> {
  const sum: Record<string, number> = {};
  for (const record of records) for (const [key, count] of Object.entries(record)) sum[key] = (sum[key] ?? 0) + count;
  return sum;
}
