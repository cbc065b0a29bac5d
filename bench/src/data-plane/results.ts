import { round } from '../measure/latency.js';
import type { DatabaseActivity } from '../measure/postgres.js';
import { activityPer } from '../measure/postgres.js';
import { rpcCallsPer } from '../measure/rpc-calls.js';
import type { BenchSession } from '../measure/session.js';
import { check, machineFacts, type TargetCheck } from '../report.js';
import { durationSeconds, warmupSeconds } from '../scenarios.js';
import type { Settled } from './checks.js';
import type { Summary } from './drive.js';
import type { Variant } from './requests.js';
import {
  answerTokens,
  catalogPrice,
  concurrency,
  halfSeconds,
  lowInFlight,
  lowLoadSeconds,
  maxAddedP50Ms,
  maxAddedP99Ms,
  maxPlatformCpuMicrosPerRequest,
  maxTransactionsPerRequest,
  minFrontPerSecond,
  minLimitedKeyRatio,
  pacedPauseMs,
  requestTimeoutMs,
  topUpUsd,
} from './settings.js';
import type { Traffic } from './traffic.js';
import type { DataPlaneWorld } from './world.js';

/** Everything bench:data-plane measured, for its report and its printout. */
export interface DataPlaneMeasured {
  world: DataPlaneWorld;
  traffic: Traffic;
  throughput: Record<string, Summary>;
  lowLoad: Record<string, Summary>;
  paced: Record<string, Summary>;
  /** The key with every limit set and the key without, interleaved (phases.ts limitsPhase), keyed `<in flight>|<variant>`. */
  keyLimits: Record<string, Summary>;
  stages: Record<string, Summary>;
  /**
   * pg_stat_database and the RPCs served, from the service/fast run at `concurrency` to the end
   * of the paced runs, and the front-door requests of that span.
   */
  frontActivity: { before: DatabaseActivity; after: DatabaseActivity; rpcBefore: Record<string, number>; rpcAfter: Record<string, number>; requests: number };
  fastFrontSent: number;
  settled: Settled;
  warnings: string[];
}

/** Front door req/s ÷ direct req/s at `concurrency` in flight, per variant (information: the targets are absolute rates). */
function ratiosOf(m: DataPlaneMeasured) {
  const { throughput } = m;
  const { variants } = m.traffic;
  const ratioOf = (front: Summary, direct: Summary) => (direct.perSecond > 0 ? round(front.perSecond / direct.perSecond, 3) : 0);
  return {
    nonStreaming: ratioOf(throughput[variants.front.name], throughput[variants.direct.name]),
    streaming: ratioOf(throughput[variants.frontStream.name], throughput[variants.directStream.name]),
    fastNonStreaming: ratioOf(throughput[variants.fast.name], throughput[variants.direct.name]),
  };
}

/** What the front door adds to the latency at low load (front − direct), p50 and p99. */
function addedLatencyOf(m: DataPlaneMeasured): Record<string, { p50: number; p99: number }> {
  const { lowLoad } = m;
  const { variants } = m.traffic;
  const added = (inFlight: number, front: Variant, direct: Variant) => {
    const f = lowLoad[`${inFlight}|${front.name}`];
    const d = lowLoad[`${inFlight}|${direct.name}`];
    return { p50: round(f.latencyMs.p50 - d.latencyMs.p50), p99: round(f.latencyMs.p99 - d.latencyMs.p99) };
  };
  const addedLatency: Record<string, { p50: number; p99: number }> = {};
  for (const inFlight of lowInFlight) {
    addedLatency[`${inFlight} in flight, non-streaming`] = added(inFlight, variants.front, variants.direct);
    addedLatency[`${inFlight} in flight, streaming`] = added(inFlight, variants.frontStream, variants.directStream);
  }
  addedLatency['1 in flight, service/fast non-streaming'] = added(1, variants.fast, variants.direct);
  const pacedAdded = (front: Variant, direct: Variant) => {
    const f = m.paced[front.name];
    const d = m.paced[direct.name];
    return { p50: round(f.latencyMs.p50 - d.latencyMs.p50), p99: round(f.latencyMs.p99 - d.latencyMs.p99) };
  };
  addedLatency['1 in flight paced, non-streaming'] = pacedAdded(variants.front, variants.direct);
  addedLatency['1 in flight paced, streaming'] = pacedAdded(variants.frontStream, variants.directStream);
  return addedLatency;
}

/** The key with every limit set against the key without: req/s ratio at `concurrency` in flight, added latency at 1. */
export function keyLimitsOf(m: DataPlaneMeasured) {
  const { variants } = m.traffic;
  const at = (inFlight: number) => ({
    without: m.keyLimits[`${inFlight}|${variants.front.name}`],
    with: m.keyLimits[`${inFlight}|${variants.frontLimited.name}`],
  });
  const busy = at(concurrency);
  const idle = at(1);
  return {
    runs: m.keyLimits,
    ratioAtConcurrency: busy.without.perSecond > 0 ? round(busy.with.perSecond / busy.without.perSecond, 3) : 0,
    addedAtOneMs: { p50: round(idle.with.latencyMs.p50 - idle.without.latencyMs.p50), p99: round(idle.with.latencyMs.p99 - idle.without.latencyMs.p99) },
  };
}

/** The span of the database and RPC counters, as the report names it. */
const activitySpan = (requests: number) =>
  `service/fast at ${concurrency} in flight and the low-load and paced runs after it: ${requests} front-door requests; direct requests touch neither`;

/** The database's counters per front-door request of the span (idle pollers included). */
function postgresPerFrontRequestOf(m: DataPlaneMeasured) {
  const { before, after, requests } = m.frontActivity;
  return {
    span: activitySpan(requests),
    transactions: activityPer(before, after, 'transactions', requests),
    inserted: activityPer(before, after, 'inserted', requests),
    updated: activityPer(before, after, 'updated', requests),
  };
}

/** The processes of the platform, whose CPU per request is summed against the target (the upstream and the load generator are not). */
export const platformProcesses = ['gateway', 'data-plane', 'keys', 'billing', 'conversations', 'identity+webhooks', 'postgres', 'nats-server'];

/** CPU µs per complete answer of a run, summed over the platform's processes. */
export const platformCpuMicros = (s: Summary) => platformProcesses.reduce((sum, name) => sum + (s.cpuMicrosPerRequest[name] ?? 0), 0);

function targetsOf(
  m: DataPlaneMeasured,
  addedLatency: Record<string, { p50: number; p99: number }>,
  postgres: ReturnType<typeof postgresPerFrontRequestOf>,
  keyLimits: ReturnType<typeof keyLimitsOf>,
): TargetCheck[] {
  const { variants } = m.traffic;
  const latency = ['1 in flight, non-streaming', '1 in flight, streaming', '1 in flight paced, non-streaming', '1 in flight paced, streaming'].flatMap(
    (run) => [
      check(`added p50 (ms), ${run}`, addedLatency[run].p50, '<', maxAddedP50Ms, 'ms'),
      check(`added p99 (ms), ${run}`, addedLatency[run].p99, '<', maxAddedP99Ms, 'ms'),
    ],
  );
  const fronts = [variants.front, variants.fast, variants.frontStream].map((variant) => m.throughput[variant.name]);
  return [
    ...latency,
    ...fronts.map((s) => check(`${s.variant}: req/s at ${concurrency} in flight`, s.perSecond, '>=', minFrontPerSecond, 'req/s')),
    ...fronts.map((s) =>
      check(
        `${s.variant}: CPU µs per request, all platform processes, ${concurrency} in flight`,
        platformCpuMicros(s),
        '<=',
        maxPlatformCpuMicrosPerRequest,
        'µs',
      ),
    ),
    check('Postgres transactions per front-door request', postgres.transactions, '<=', maxTransactionsPerRequest, 'transactions'),
    check(`key with every limit ÷ key without: req/s at ${concurrency} in flight`, keyLimits.ratioAtConcurrency, '>=', minLimitedKeyRatio, '×'),
  ];
}

/** The RPCs the mesh served per front-door request of the span (background refreshes and lease renewals included). */
function rpcPerFrontRequestOf(m: DataPlaneMeasured) {
  const { rpcBefore, rpcAfter, requests } = m.frontActivity;
  return { span: activitySpan(requests), ...rpcCallsPer(rpcBefore, rpcAfter, requests) };
}

/** The JSON report of bench:data-plane (docs/operations.md). */
export function dataPlaneResults(session: BenchSession, m: DataPlaneMeasured, errors: string[]) {
  const { world, traffic, settled } = m;
  const { account } = world;
  const ratios = ratiosOf(m);
  const addedLatency = addedLatencyOf(m);
  const postgresPerFrontRequest = postgresPerFrontRequestOf(m);
  const keyLimits = keyLimitsOf(m);
  return {
    at: session.at,
    machine: machineFacts(session.loadAverageAtStart),
    settings: {
      concurrency,
      durationSeconds,
      halfSeconds,
      warmupSeconds,
      lowLoadSeconds,
      lowInFlight,
      requestTimeoutMs,
      answerTokens,
      client: 'node:http Agent, keepAlive, maxSockets 64, one per target',
      upstream: 'OpenAiUpstream (runtime/src/dev/openai-upstream.ts) in a child process',
      mesh: { ...world.meshEnv, SWITCHBOARD_MODELS_FILE: '<temp catalog>' },
      nats: world.natsSetup,
      catalogPricePer1m: catalogPrice,
    },
    meshStartSeconds: world.meshStartSeconds,
    throughput: m.throughput,
    ratios,
    lowLoad: m.lowLoad,
    addedLatencyMs: addedLatency,
    paced: { pauseMs: pacedPauseMs, runs: m.paced },
    keyLimits,
    stages: m.stages,
    postgresPerFrontRequest,
    rpcPerFrontRequest: rpcPerFrontRequestOf(m),
    billing: {
      balanceAtStart: account.balanceAtStart,
      topUpUsd,
      balanceAfterTopUp: account.balanceAfterTopUp,
      balanceAtEnd: settled.balanceAtEnd,
      costsAnswered: settled.answered.toFixed(),
      keySpendAtStart: account.spendAtStart,
      keySpendAtEnd: settled.spendAtEnd,
      limitedKeySpendAtStart: account.limited.spendAtStart,
      limitedKeySpendAtEnd: settled.limitedSpendAtEnd,
      limitedKeyCostsAnswered: settled.limitedAnswered.toFixed(),
      /** From the end of the load to the spend and the balance seen complete (or the timeout). */
      settledAfterMs: settled.settledAfterMs,
      tiers: traffic.ledger.tiers,
    },
    requests: {
      direct: traffic.sent.direct,
      frontDoor: traffic.sent['front door'],
      dataPlaneAlone: traffic.sent['data plane'],
      upstreamCalls: settled.upstreamCalls,
      fastRunFrontDoor: m.fastFrontSent,
    },
    warnings: m.warnings,
    targets: targetsOf(m, addedLatency, postgresPerFrontRequest, keyLimits),
    errors,
    totalSeconds: 0,
  };
}

export type DataPlaneReport = ReturnType<typeof dataPlaneResults>;
