import { table } from '@switchboard/testkit/text-table';
import { postgresServerLine } from '../measure/inserts.js';
import { type Latency, round } from '../measure/latency.js';
import { statsFlushMs } from '../measure/postgres.js';
import type { CpuUse } from '../measure/proc.js';
import { benchHeader, fmt } from '../report.js';
import { microsPerEvent, type WebhooksMeasured, type WebhooksReport } from './results.js';
import { concurrency, endpointConcurrency, events, jetstreamSeconds, latencySeconds, warmupEvents } from './settings.js';

const rateRow = (name: string, perSecond: number, answer: Latency | undefined, receipt: Latency | undefined, ratioCell: string) => [
  name,
  fmt(perSecond),
  fmt(answer?.p50, 1),
  fmt(answer?.p99, 1),
  fmt(receipt?.p50, 1),
  fmt(receipt?.p99, 1),
  ratioCell,
];

/** The throughput table: webhook events against JetStream publishes, the insert loop for reference. */
function throughputSection(report: WebhooksReport, payload: string): string[] {
  const { throughput, ratio, ratioToInserts, postgresInserts: inserts } = report;
  const { before: jsBefore, after: jsAfter, perSecond: jetstreamRate } = report.jetstream;
  const bytes = Buffer.byteLength(payload);
  return [
    `Throughput: ${events} events after ${warmupEvents} warm-up, ${concurrency} PublishEvent calls in flight; JetStream: ${concurrency} publishes in flight, ${jetstreamSeconds} s before and after`,
    table(
      ['load', 'per s', 'answer p50 ms', 'answer p99 ms', 'receipt p50 ms', 'receipt p99 ms', '÷ JetStream'],
      [
        rateRow(
          'webhooks: PublishEvent → receiver 2xx (events)',
          throughput.eventsPerSecond,
          throughput.publishLatencyMs,
          throughput.receiptLatencyMs,
          ratio.toFixed(2),
        ),
        rateRow('  PublishEvent answered (calls)', throughput.publishAnsweredPerSecond, undefined, undefined, '-'),
        rateRow(`JetStream acknowledged publish, ${bytes} B (before)`, jsBefore.perSecond, jsBefore.latencyMs, undefined, '-'),
        rateRow(`JetStream acknowledged publish, ${bytes} B (after)`, jsAfter.perSecond, jsAfter.latencyMs, undefined, '-'),
        rateRow('JetStream (mean)', jetstreamRate, undefined, undefined, '1.00'),
        [
          `baseline: raw Postgres INSERT (autocommit, ${inserts.concurrency} at a time, mesh idle)`,
          fmt(inserts.insertsPerSecond),
          fmt(inserts.latencyMs.p50, 1),
          fmt(inserts.latencyMs.p99, 1),
          '-',
          '-',
          '-',
        ],
      ],
    ),
    `  webhook deliveries/s ÷ raw Postgres inserts/s: ${ratioToInserts.toFixed(2)} (the target); ${postgresServerLine(inserts)}`,
    `  receipt: publish start → arrival at the receiver (at ${concurrency} in flight it includes the queue behind the dispatcher)`,
  ];
}

/** The open-loop latency table. */
function latencySection(report: WebhooksReport, m: WebhooksMeasured): string[] {
  const { latency: l } = report;
  const receipt = l.receiptLatencyMs;
  const answer = l.publishLatencyMs;
  return [
    `Latency: open loop at ${round(m.latency.rate, 1)} events/s (half of ${report.throughput.eventsPerSecond}/s) for ${latencySeconds} s, ${m.latency.count} events; achieved ${l.achievedRate}/s, max pacing lag ${fmt(m.latency.run.maxLagMs, 1)} ms, peak ${m.latency.run.peakInFlight} calls in flight`,
    table(
      ['measure', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms'],
      [
        ['event → receipt (publish start → receiver)', fmt(receipt.p50, 1), fmt(receipt.p90, 1), fmt(receipt.p99, 1), fmt(receipt.max, 1)],
        ['PublishEvent answer', fmt(answer.p50, 1), fmt(answer.p90, 1), fmt(answer.p99, 1), fmt(answer.max, 1)],
      ],
    ),
  ];
}

/** CPU per process and per event of each run, and what Postgres did per event. */
function cpuSection(report: WebhooksReport, m: WebhooksMeasured): string[] {
  const webhookRate = report.throughput.eventsPerSecond;
  const { before: jsBefore, after: jsAfter } = report.jetstream;
  const { postgresPerEvent: pg } = report;
  const names = Object.keys(m.watch);
  const cpuRow = (name: string, cpu: CpuUse, perSecond: number) => [
    name,
    ...names.flatMap((n) => [fmt(cpu.processes[n]), fmt(microsPerEvent(cpu, n, perSecond))]),
    fmt(cpu.hostBusyPercent),
  ];
  return [
    'CPU (% of one core; µs per event = CPU time ÷ events; postgres = the client backends of the bench database; host = % of all cores, every process on it)',
    table(
      ['run', ...names.flatMap((n) => [`${n} %`, 'µs/ev']), 'host%'],
      [
        cpuRow(`throughput (${webhookRate}/s)`, m.throughput.cpu, webhookRate),
        cpuRow(`latency (${round(m.latency.rate, 1)}/s)`, m.latency.cpu, m.latency.rate),
        cpuRow(`JetStream before (${jsBefore.perSecond}/s, µs per publish)`, jsBefore.cpu, jsBefore.perSecond),
        cpuRow(`JetStream after (${jsAfter.perSecond}/s, µs per publish)`, jsAfter.cpu, jsAfter.perSecond),
      ],
    ),
    `  Postgres per event of the throughput run (pg_stat_database, read ${statsFlushMs / 1000} s after the load): ${pg.transactions} transactions, ${pg.inserted} rows inserted, ${pg.updated} updated, ${pg.deleted} deleted, ${Math.round(pg.walBytes)} WAL bytes (pollers of the idle services included)`,
  ];
}

/** What bench:webhooks prints above its targets. */
export function webhooksPrintout(report: WebhooksReport, m: WebhooksMeasured): string[] {
  const { nats, receiver } = report.settings;
  return [
    ...benchHeader('webhooks', report.at, report.machine, 'the publisher and the receiver are this process'),
    `  mesh ready in ${report.meshStartSeconds} s; NATS: ${nats}; mesh settings: WEBHOOKS_ALLOW_PRIVATE_TARGETS=true, NODE_EXTRA_CA_CERTS=<bench certificate>, WEBHOOK_ENDPOINT_CONCURRENCY=${endpointConcurrency}, LOG_LEVEL=warn (the rest default)`,
    `  one endpoint ${receiver} (agent.completed), answering 204 at once; PublishEvent over one h2c connection (Connect binary, caller data-plane)`,
    '',
    ...throughputSection(report, m.jetstream.payload),
    '',
    ...latencySection(report, m),
    '',
    ...cpuSection(report, m),
    '',
    `Fairness: workspace A's 40 endpoints answer after 14 s with 1,000 events queued; it held ${m.fairness.slowHeldAtOnce} attempts at once (WEBHOOK_WORKSPACE_CONCURRENCY). Workspace B's healthy endpoint, ${m.fairness.received}/${m.fairness.events} events: event → receipt p50 ${fmt(m.fairness.latency.p50, 1)} ms, p99 ${fmt(m.fairness.latency.p99, 1)} ms, max ${fmt(m.fairness.latency.max, 1)} ms`,
    '',
    `Delivery log of the endpoint: ${JSON.stringify(report.deliveries)}; attempts ${JSON.stringify(report.attempts)}; the receiver got ${report.receiverRequests} requests, ${report.duplicates} second arrivals of an event`,
  ];
}
