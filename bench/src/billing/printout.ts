import { table } from '@switchboard/testkit/text-table';
import { insertsLabel, postgresServerLine } from '../measure/inserts.js';
import type { Latency } from '../measure/latency.js';
import type { CpuUse } from '../measure/proc.js';
import { benchHeader, fmt } from '../report.js';
import { durationSeconds, warmupSeconds } from '../scenarios.js';
import type { EndToEnd } from './end-to-end.js';
import type { BillingReport, FeedFigures } from './results.js';
import { concurrency, workspaces } from './settings.js';

const cpuCell = (cpu: CpuUse, name: string) => fmt(cpu.processes[name]);

/** CPU of each process over each feed's answers and over its whole end-to-end span, and per usage. */
function cpuSection(report: BillingReport, runs: EndToEnd[]): string[] {
  const names = Object.keys(runs[0].callsCpu.processes);
  const cpuRow = (phase: string, cpu: CpuUse, ms: Record<string, number | undefined> | undefined) => [
    phase,
    ...names.map((name) => `${cpuCell(cpu, name)} / ${fmt(ms?.[name], 2)}`),
    fmt(cpu.hostBusyPercent),
  ];
  const rows = runs.flatMap((e2e) => {
    const figures = report.feeds[e2e.feed.key];
    return [
      cpuRow(`${e2e.feed.name}: answers`, e2e.callsCpu, figures.answered.cpuMsPerUsage),
      cpuRow(`${e2e.feed.name}: first send → last spend visible`, e2e.endToEndCpu, figures.endToEnd.cpuMsPerUsage),
    ];
  });
  return [
    'CPU (% of one core; postgres = the client backends of the bench database; host = % of all cores, every process on it) and CPU ms per usage',
    table(['phase', ...names, 'host%'], rows),
  ];
}

/** A row of the rates table: how many in how long, the rate, its latencies when each was timed, and the ratio to the raw inserts. */
function rateRow(label: string, count: number, seconds: number | undefined, perSecond: number, latency?: Latency, ratio?: number): string[] {
  const ms = (value: number | undefined) => fmt(value, latency && latency.p50 < 10 ? 2 : 1);
  return [
    label,
    fmt(count),
    fmt(seconds, 2),
    fmt(perSecond),
    ms(latency?.p50),
    ms(latency?.p99),
    ms(latency?.max),
    ratio === undefined ? '-' : ratio.toFixed(2),
  ];
}

/** A feed's rows: its answers, settled by billing, and end to end. */
function feedRows(name: string, answeredLabel: string, f: FeedFigures): string[][] {
  const { answered, settledByBilling: settled, endToEnd } = f;
  return [
    rateRow(`${name}: ${answeredLabel}`, answered.usages, answered.seconds, answered.perSecond, answered.latencyMs, answered.ratio),
    rateRow(`${name}: settled by billing (usage rows)`, answered.usages, settled.seconds, settled.usagesPerSecond, undefined, settled.ratio),
    rateRow(`${name}: end to end (keys spend visible)`, answered.usages, endToEnd.seconds, endToEnd.usagesPerSecond, undefined, endToEnd.ratio),
  ];
}

/** Where a feed's usages were at its last answer, and how long after it the last key's spend was complete. */
function backlogLine(name: string, f: FeedFigures): string {
  const { usageRows, unpublishedOutboxRows, keysAppliedUsageEvents } = f.backlogAtLastAnswer;
  const sent = f.usagesBefore + f.answered.usages;
  return `  ${name}, at the last answer: billing had ${usageRows} usage rows of the ${sent} sent so far, ${unpublishedOutboxRows} outbox rows unpublished, the keys service had applied ${keysAppliedUsageEvents} usage events; the last key's spend was complete ${fmt(f.endToEnd.lagAfterLastAnswerMs)} ms after the last answer.`;
}

/** What bench:billing prints above its targets. */
export function billingPrintout(report: BillingReport, runs: EndToEnd[]): string[] {
  const { meshStartSeconds, warmUp, postgresInserts: inserts } = report;
  const natsSetup = report.settings.nats;
  const out = benchHeader('billing', report.at, report.machine, 'the load generator is this process');
  out.push(
    `  mesh ready in ${meshStartSeconds} s; NATS: ${natsSetup}; ${workspaces} workspaces with a key each; warm-up (${warmupSeconds} s) before each feed: ${Object.entries(
      warmUp.usages,
    )
      .map(([feed, usages]) => `${feed} ${usages} usages`)
      .join(', ')}`,
  );
  out.push('');
  out.push(`Usage of service/fast (distinct generation ids) from the bench process, ${concurrency} in flight, ${durationSeconds} s per feed:`);
  for (const e2e of runs) out.push(`  ${e2e.feed.name}: ${e2e.feed.how}`);
  const answeredLabel = { workStream: 'acknowledged by JetStream', recordUsage: 'calls answered' };
  out.push(
    table(
      ['measure', 'usages', 'seconds', 'usages/s', 'p50 ms', 'p99 ms', 'max ms', '÷ raw inserts'],
      [
        ...runs.flatMap((e2e) => feedRows(e2e.feed.name, answeredLabel[e2e.feed.key], report.feeds[e2e.feed.key])),
        rateRow(insertsLabel(inserts), inserts.inserts, inserts.seconds, inserts.insertsPerSecond, inserts.latencyMs),
      ],
    ),
  );
  for (const e2e of runs) out.push(backlogLine(e2e.feed.name, report.feeds[e2e.feed.key]));
  out.push(`  ${postgresServerLine(inserts)}`);
  out.push('', ...cpuSection(report, runs));
  return out;
}
