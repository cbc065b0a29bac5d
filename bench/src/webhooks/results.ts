import type { InsertLoopResult } from '../measure/inserts.js';
import { latencyOf, round } from '../measure/latency.js';
import { activityPer, type DatabaseActivity } from '../measure/postgres.js';
import { type CpuUse, cpuMicrosPer } from '../measure/proc.js';
import type { BenchSession } from '../measure/session.js';
import { check, machineFacts } from '../report.js';
import type { FairnessResult } from './fairness.js';
import type { JetstreamRun } from './jetstream.js';
import type { latencyRun, throughputRun, warmUp } from './phases.js';
import { receiptLatency } from './publish-loops.js';
import {
  concurrency,
  events,
  jetstreamSeconds,
  latencySeconds,
  maxFairP99Ms,
  maxP99Ms,
  minRatioToInserts,
  receiptTimeoutMs,
  warmupEvents,
} from './settings.js';
import type { WebhooksWorld } from './world.js';

/** CPU µs a group spent per event, from its % of one core over a run and the run's events/s. */
export const microsPerEvent = (cpu: CpuUse, name: string, perSecond: number) => cpuMicrosPer(cpu.processes[name], perSecond);

/** Everything bench:webhooks measured, for its checks, its report and its printout. */
export interface WebhooksMeasured {
  world: WebhooksWorld;
  warm: Awaited<ReturnType<typeof warmUp>>;
  watch: Record<string, Array<number | undefined>>;
  jetstream: { payload: string; before: JetstreamRun; after: JetstreamRun };
  throughput: Awaited<ReturnType<typeof throughputRun>>;
  latency: Awaited<ReturnType<typeof latencyRun>>;
  /** pg_stat_database around the throughput run. */
  stats: { before: DatabaseActivity; after: DatabaseActivity };
  log: { deliveries: Record<string, number>; attempts: Record<string, number> };
  expectedDeliveries: number;
  fairness: FairnessResult;
  inserts: InsertLoopResult;
}

/** Second arrivals of an event at the receiver over the warm-up, throughput and latency runs. */
const duplicatesOf = (m: WebhooksMeasured) => m.warm.arrivals.duplicates + m.throughput.arrivals.duplicates + m.latency.arrivals.duplicates;

/**
 * Failed calls, lost events, an event that arrived twice, a delivery log other than every delivery
 * succeeded in exactly one attempt, stray requests. Deliveries are at least once
 * (docs/webhooks.md#verifying-a-delivery): an attempt is sent again only when its outcome could not be
 * recorded, and this receiver answers 204 at once, so a second attempt or arrival here is a fault.
 */
export function webhooksErrors(m: WebhooksMeasured): string[] {
  const errors: string[] = [];
  for (const [name, run] of [
    ['warm-up', m.warm.run],
    ['throughput', m.throughput.run],
    ['latency', m.latency.run],
  ] as const) {
    if (run.errors > 0) errors.push(`${name}: ${run.errors} PublishEvent calls failed (first: ${run.firstProblem})`);
  }
  for (const [name, run] of [
    ['JetStream 1/2', m.jetstream.before],
    ['JetStream 2/2', m.jetstream.after],
  ] as const) {
    if (run.errors > 0) errors.push(`${name}: ${run.errors} publishes failed (first: ${run.firstProblem})`);
  }
  if (m.throughput.lastArrival === undefined)
    errors.push(
      `throughput: ${events - m.throughput.arrivals.received} of ${events} events never reached the receiver (${receiptTimeoutMs} ms after the last answer)`,
    );
  if (m.latency.lastArrival === undefined)
    errors.push(`latency: ${m.latency.count - m.latency.arrivals.received} of ${m.latency.count} events never reached the receiver`);
  const { deliveries, attempts } = m.log;
  if ((deliveries.succeeded ?? 0) !== m.expectedDeliveries || Object.keys(deliveries).length !== 1)
    errors.push(`the delivery log holds ${JSON.stringify(deliveries)}, expected ${m.expectedDeliveries} succeeded`);
  if (Object.keys(attempts).some((key) => key !== 'success')) errors.push(`failed attempts in the delivery log: ${JSON.stringify(attempts)}`);
  if ((attempts.success ?? 0) !== m.expectedDeliveries)
    errors.push(`the delivery log holds ${attempts.success ?? 0} successful attempts, expected one per delivery (${m.expectedDeliveries})`);
  const duplicates = duplicatesOf(m);
  if (duplicates > 0) errors.push(`${duplicates} events reached the receiver more than once`);
  if (m.fairness.errors > 0) errors.push(`fairness: ${m.fairness.errors} calls failed (first: ${m.fairness.firstProblem})`);
  if (m.fairness.received !== m.fairness.events)
    errors.push(`fairness: ${m.fairness.events - m.fairness.received} of B's ${m.fairness.events} events never arrived`);
  const { unknown } = m.world.receiver.stats();
  if (unknown > 0) errors.push(`the receiver got ${unknown} requests it could not attribute to an event of this run`);
  return errors;
}

const cpuMicrosPerEventOf = (m: WebhooksMeasured, cpu: CpuUse, perSecond: number) =>
  Object.fromEntries(Object.keys(m.watch).map((name) => [name, microsPerEvent(cpu, name, perSecond)]));

/** The throughput run: events/s (publish → receipt), the publish answers, latencies and CPU. */
function throughputReport(m: WebhooksMeasured) {
  const t = m.throughput;
  const webhookRate = t.eventsPerSecond;
  return {
    events,
    seconds: round(t.seconds),
    eventsPerSecond: webhookRate,
    publishAnsweredPerSecond: t.publishRate,
    publishLatencyMs: latencyOf(t.run.answerLatencies),
    receiptLatencyMs: receiptLatency(t.run, t.arrivals),
    cpu: t.cpu,
    cpuMicrosPerEvent: cpuMicrosPerEventOf(m, t.cpu, webhookRate),
  };
}

/** The open-loop run at half the rate: its pacing, latencies and CPU. */
function latencyReport(m: WebhooksMeasured) {
  const l = m.latency;
  return {
    targetRate: round(l.rate, 1),
    events: l.count,
    achievedRate: round(l.arrivals.received / l.seconds, 1),
    seconds: round(l.seconds),
    maxPacingLagMs: round(l.run.maxLagMs),
    peakPublishesInFlight: l.run.peakInFlight,
    publishLatencyMs: latencyOf(l.run.answerLatencies),
    receiptLatencyMs: l.latency,
    cpu: l.cpu,
    cpuMicrosPerEvent: cpuMicrosPerEventOf(m, l.cpu, l.rate),
  };
}

/** The JSON report of bench:webhooks (docs/operations.md). */
export function webhooksResults(session: BenchSession, m: WebhooksMeasured, errors: string[]) {
  const { world, throughput: t, latency: l, inserts } = m;
  const webhookRate = t.eventsPerSecond;
  const jetstreamRate = Math.round((m.jetstream.before.perSecond + m.jetstream.after.perSecond) / 2);
  const ratio = jetstreamRate > 0 ? round(webhookRate / jetstreamRate, 3) : 0;
  const ratioToInserts = inserts.insertsPerSecond > 0 ? round(webhookRate / inserts.insertsPerSecond, 3) : 0;
  const perEvent = (key: keyof DatabaseActivity) => activityPer(m.stats.before, m.stats.after, key, events);
  return {
    at: session.at,
    machine: machineFacts(session.loadAverageAtStart),
    settings: {
      concurrency,
      events,
      warmupEvents,
      latencySeconds,
      jetstreamSeconds,
      jetstreamMessageBytes: Buffer.byteLength(m.jetstream.payload),
      mesh: { ...world.meshEnv, NODE_EXTRA_CA_CERTS: '<bench certificate>' },
      receiver: world.receiverUrl,
      nats: world.natsSetup,
    },
    meshStartSeconds: world.meshStartSeconds,
    jetstream: { before: m.jetstream.before, after: m.jetstream.after, perSecond: jetstreamRate },
    throughput: throughputReport(m),
    ratio,
    postgresInserts: inserts,
    ratioToInserts,
    latency: latencyReport(m),
    postgresPerEvent: {
      transactions: perEvent('transactions'),
      inserted: perEvent('inserted'),
      updated: perEvent('updated'),
      deleted: perEvent('deleted'),
      walBytes: perEvent('walBytes'),
    },
    fairness: m.fairness,
    deliveries: m.log.deliveries,
    attempts: m.log.attempts,
    duplicates: duplicatesOf(m),
    receiverRequests: world.receiver.stats().requests,
    targets: [
      check('webhook deliveries/s (PublishEvent → receiver 2xx) ÷ raw single-row Postgres INSERTs/s', ratioToInserts, '>=', minRatioToInserts, 'ratio'),
      check(`p99 event → receipt (ms) at half the measured rate (${round(l.rate, 1)}/s)`, l.latency.p99, '<', maxP99Ms, 'ms'),
      check(
        "fairness: a healthy workspace's p99 event → receipt (ms) beside 40 endpoints answering after 14 s",
        m.fairness.latency.p99,
        '<',
        maxFairP99Ms,
        'ms',
      ),
    ],
    errors,
    totalSeconds: 0,
  };
}

export type WebhooksReport = ReturnType<typeof webhooksResults>;
