import { ConnectError, createClient, type Interceptor } from '@connectrpc/connect';
import { Http2SessionManager } from '@connectrpc/connect-node';
import { Health, HealthCheckResponse_ServingStatus } from '@switchboard/contracts/grpc/health/v1/health_pb';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { latencyOf, round } from '../measure/latency.js';
import { closedLoop, Tally } from '../measure/loop.js';
import { type CpuUse, cpuMeter, cpuMicrosPer, weightedCpu } from '../measure/proc.js';
import { warmupSeconds } from '../scenarios.js';
import { callTimeoutMs, concurrency, halfSeconds, maxCallsPerHalf, progress, unloadedSeconds } from './settings.js';
import type { TransportKind } from './transports.js';

/** One call: resolves undefined when the answer is the expected one, else what was wrong with it. */
export type Call = () => Promise<string | undefined>;

interface Half {
  ok: number;
  failed: number;
  errors: number;
  seconds: number;
  latencies: number[];
  cpu: CpuUse;
  firstProblem?: string;
}

/** `inFlight` loops calling `call` for `seconds`; latencies of the expected answers only. */
export async function drive(call: Call, seconds: number, watch: Record<string, Array<number | undefined>>, inFlight = concurrency): Promise<Half> {
  const tally = new Tally();
  const stopMeter = cpuMeter(watch);
  const elapsed = await closedLoop(inFlight, { maxCalls: maxCallsPerHalf, seconds }, async () => {
    const callStarted = performance.now();
    try {
      const problem = await call();
      if (problem === undefined) tally.pass(performance.now() - callStarted);
      else tally.wrong(problem);
    } catch (err) {
      tally.error(ConnectError.from(err).message);
    }
  });
  const { ok, failed, errors, latencies, firstProblem } = tally;
  return { ok, failed, errors, seconds: elapsed, latencies, cpu: stopMeter(), firstProblem };
}

export interface RpcSummary {
  calls: number;
  seconds: number;
  callsPerSecond: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  failed: number;
  errors: number;
  firstProblem?: string;
  cpu: CpuUse;
  /** CPU the keys process spent per expected answer, in µs. */
  keysCpuMicrosPerCall?: number;
}

export function summarize(halves: Half[]): RpcSummary {
  const calls = halves.reduce((sum, half) => sum + half.ok, 0);
  const seconds = halves.reduce((sum, half) => sum + half.seconds, 0);
  const cpu = weightedCpu(halves);
  const callsPerSecond = seconds > 0 ? Math.round(calls / seconds) : 0;
  return {
    calls,
    seconds: round(seconds),
    callsPerSecond,
    latencyMs: latencyOf(halves.flatMap((half) => half.latencies)),
    failed: halves.reduce((sum, half) => sum + half.failed, 0),
    errors: halves.reduce((sum, half) => sum + half.errors, 0),
    firstProblem: halves.find((half) => half.firstProblem)?.firstProblem,
    cpu,
    keysCpuMicrosPerCall: cpuMicrosPer(cpu.processes.keys, callsPerSecond),
  };
}

export interface RpcComparison {
  transport: string;
  path: string;
  health: RpcSummary;
  authorize: RpcSummary;
  /** AuthorizeKey calls/s ÷ Health/Check calls/s. */
  ratio: number;
  /** AuthorizeKey one call at a time, after the load: the latency without queueing. */
  authorizeAlone: RpcSummary;
}

/**
 * AuthorizeKey against Health/Check on the keys server over one transport, `concurrency` calls in
 * flight on one h2c connection, interleaved (keys.ts has the whole method), then AuthorizeKey one
 * call at a time.
 */
export async function compareRpcs(
  kind: TransportKind,
  keysUrl: string,
  meshToken: string,
  fullKey: string,
  keysPid: number | undefined,
): Promise<RpcComparison> {
  const sessionManager = new Http2SessionManager(keysUrl);
  const bearer = `Bearer ${meshToken}`;
  // The same header on both RPCs: the health check ignores it, so the two requests weigh the same on the wire.
  const addToken: Interceptor = (next) => (req) => {
    req.header.set('authorization', bearer);
    return next(req);
  };
  const transport = kind.make(keysUrl, sessionManager, [addToken]);
  const health = createClient(Health, transport);
  const keys = createClient(KeyService, transport);
  const checkHealth: Call = async () => {
    const answer = await health.check({ service: 'liveness' }, { timeoutMs: callTimeoutMs });
    return answer.status === HealthCheckResponse_ServingStatus.SERVING ? undefined : `Health/Check status ${HealthCheckResponse_ServingStatus[answer.status]}`;
  };
  const authorize: Call = async () => {
    const answer = await keys.authorizeKey({ fullKey }, { timeoutMs: callTimeoutMs });
    return answer.allowed ? undefined : `AuthorizeKey allowed=false reason=${JSON.stringify(answer.reason)}`;
  };
  try {
    for (const [name, call] of [
      ['Health/Check', checkHealth],
      ['AuthorizeKey', authorize],
    ] as const) {
      const problem = await call().catch((err: unknown) => `${ConnectError.from(err).message}`);
      if (problem) throw new Error(`${kind.name}: the first ${name} call failed: ${problem}`);
    }
    const watch = { keys: [keysPid], 'bench (load generator)': [process.pid] };
    progress(
      `${kind.name}: warm-up ${warmupSeconds / 2} s per RPC, then Health, AuthorizeKey, AuthorizeKey, Health, ${halfSeconds} s each, then AuthorizeKey 1 at a time ${unloadedSeconds} s`,
    );
    if (warmupSeconds > 0) {
      await drive(checkHealth, warmupSeconds / 2, {});
      await drive(authorize, warmupSeconds / 2, {});
    }
    const health1 = await drive(checkHealth, halfSeconds, watch);
    const authorize1 = await drive(authorize, halfSeconds, watch);
    const authorize2 = await drive(authorize, halfSeconds, watch);
    const health2 = await drive(checkHealth, halfSeconds, watch);
    const alone = await drive(authorize, unloadedSeconds, watch, 1);
    const healthSummary = summarize([health1, health2]);
    const authorizeSummary = summarize([authorize1, authorize2]);
    return {
      transport: kind.name,
      path: kind.path,
      health: healthSummary,
      authorize: authorizeSummary,
      ratio: healthSummary.callsPerSecond > 0 ? round(authorizeSummary.callsPerSecond / healthSummary.callsPerSecond, 3) : 0,
      authorizeAlone: summarize([alone]),
    };
  } finally {
    sessionManager.abort();
  }
}
