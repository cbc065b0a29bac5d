import { round } from '../measure/latency.js';
import type { DatabaseActivity } from '../measure/postgres.js';
import { activityPer } from '../measure/postgres.js';
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
  minRatio,
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
  stages: Record<string, Summary>;
  /** pg_stat_database from the service/fast run at `concurrency` to the end of the low-load runs, and its front-door requests. */
  frontActivity: { before: DatabaseActivity; after: DatabaseActivity; requests: number };
  fastFrontSent: number;
  settled: Settled;
  warnings: string[];
}

/** Front door req/s ÷ direct req/s at `concurrency` in flight, per variant. */
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
  return addedLatency;
}

function targetsOf(ratios: ReturnType<typeof ratiosOf>, addedLatency: Record<string, { p50: number; p99: number }>): TargetCheck[] {
  return [
    check(`front door req/s ÷ direct req/s, non-streaming, ${concurrency} in flight`, ratios.nonStreaming, '>=', minRatio, 'ratio'),
    check(`front door req/s ÷ direct req/s, streaming, ${concurrency} in flight`, ratios.streaming, '>=', minRatio, 'ratio'),
    check(`front door (service/fast) req/s ÷ direct req/s, non-streaming, ${concurrency} in flight`, ratios.fastNonStreaming, '>=', minRatio, 'ratio'),
    check('added p50 (ms), 1 in flight, non-streaming', addedLatency['1 in flight, non-streaming'].p50, '<', maxAddedP50Ms, 'ms'),
    check('added p99 (ms), 1 in flight, non-streaming', addedLatency['1 in flight, non-streaming'].p99, '<', maxAddedP99Ms, 'ms'),
    check('added p50 (ms), 1 in flight, streaming', addedLatency['1 in flight, streaming'].p50, '<', maxAddedP50Ms, 'ms'),
    check('added p99 (ms), 1 in flight, streaming', addedLatency['1 in flight, streaming'].p99, '<', maxAddedP99Ms, 'ms'),
  ];
}

/** The database's counters per front-door request of the span (idle pollers included). */
function postgresPerFrontRequestOf(m: DataPlaneMeasured) {
  const { before, after, requests } = m.frontActivity;
  return {
    span: `service/fast at ${concurrency} in flight and the low-load runs after it: ${requests} front-door requests; direct requests touch no database`,
    transactions: activityPer(before, after, 'transactions', requests),
    inserted: activityPer(before, after, 'inserted', requests),
    updated: activityPer(before, after, 'updated', requests),
  };
}

/** The JSON report of bench:data-plane (docs/operations.md). */
export function dataPlaneResults(session: BenchSession, m: DataPlaneMeasured, errors: string[]) {
  const { world, traffic, settled } = m;
  const { account } = world;
  const ratios = ratiosOf(m);
  const addedLatency = addedLatencyOf(m);
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
    stages: m.stages,
    postgresPerFrontRequest: postgresPerFrontRequestOf(m),
    billing: {
      balanceAtStart: account.balanceAtStart,
      topUpUsd,
      balanceAfterTopUp: account.balanceAfterTopUp,
      balanceAtEnd: settled.balanceAtEnd,
      frontDoorCostsAnswered: settled.answered.toFixed(),
      keySpendAtStart: account.spendAtStart,
      keySpendAtEnd: settled.spendAtEnd,
      tiers: traffic.ledger.tiers,
    },
    requests: {
      direct: traffic.directRequestsSent,
      frontDoor: traffic.frontRequestsSent,
      upstreamCalls: settled.upstreamCalls,
      fastRunFrontDoor: m.fastFrontSent,
    },
    warnings: m.warnings,
    targets: targetsOf(ratios, addedLatency),
    errors,
    totalSeconds: 0,
  };
}

export type DataPlaneReport = ReturnType<typeof dataPlaneResults>;
