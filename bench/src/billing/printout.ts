import { table } from '@switchboard/testkit/text-table';
import { insertsLabel, postgresServerLine } from '../measure/inserts.js';
import type { CpuUse } from '../measure/proc.js';
import { benchHeader, fmt } from '../report.js';
import { durationSeconds, warmupSeconds } from '../scenarios.js';
import type { EndToEnd } from './end-to-end.js';
import type { BillingReport } from './results.js';
import { concurrency, workspaces } from './settings.js';

const cpuCell = (cpu: CpuUse, name: string) => fmt(cpu.processes[name]);

/** CPU of each process over the calls and over the whole end-to-end span, and per usage. */
function cpuSection(report: BillingReport, e2e: EndToEnd): string[] {
  const names = Object.keys(e2e.watch);
  const cpuRow = (phase: string, cpu: CpuUse, ms: Record<string, number | undefined> | undefined) => [
    phase,
    ...names.map((name) => `${cpuCell(cpu, name)} / ${fmt(ms?.[name], 2)}`),
    fmt(cpu.hostBusyPercent),
  ];
  return [
    'CPU (% of one core; postgres = the client backends of the bench database; host = % of all cores, every process on it) and CPU ms per usage',
    table(
      ['phase', ...names, 'host%'],
      [
        cpuRow('calls', e2e.callsCpu, report.recordUsage.cpuMsPerUsage),
        cpuRow('first call → last spend visible', e2e.endToEndCpu, report.endToEnd.cpuMsPerUsage),
      ],
    ),
  ];
}

/** What bench:billing prints above its targets. */
export function billingPrintout(report: BillingReport, e2e: EndToEnd): string[] {
  const { run, callSeconds, backlog } = e2e;
  const { meshStartSeconds, warmUp } = report;
  const warmUsages = warmUp.usages;
  const endToEndSeconds = e2e.visibleAt === undefined ? undefined : (e2e.visibleAt - run.firstCallAt) / 1000;
  const natsSetup = report.settings.nats;
  const { callsPerSecond, latencyMs } = report.recordUsage;
  const { usagesPerSecond: endToEndPerSecond } = report.endToEnd;
  const { ratio, callsRatio, postgresInserts: inserts } = report;
  const out = benchHeader('billing', report.at, report.machine, 'the load generator is this process');
  out.push(
    `  mesh ready in ${meshStartSeconds} s; NATS: ${natsSetup}; ${workspaces} workspaces with a key each; ${warmUsages} usages of warm-up (${warmupSeconds} s) before the measurement`,
  );
  out.push('');
  out.push(
    `RecordUsage (service/fast, distinct generation ids) from the bench process, ${concurrency} in flight over one h2c connection (Connect binary, mesh token of data-plane), ${durationSeconds} s`,
  );
  out.push(
    table(
      ['measure', 'usages', 'seconds', 'usages/s', 'p50 ms', 'p99 ms', 'max ms', '÷ raw inserts'],
      [
        [
          'calls answered',
          fmt(run.ok),
          fmt(callSeconds, 2),
          fmt(callsPerSecond),
          fmt(latencyMs.p50, 1),
          fmt(latencyMs.p99, 1),
          fmt(latencyMs.max, 1),
          callsRatio.toFixed(2),
        ],
        ['end to end (keys spend visible)', fmt(run.ok), fmt(endToEndSeconds, 2), fmt(endToEndPerSecond), '-', '-', '-', ratio.toFixed(2)],
        [
          insertsLabel(inserts),
          fmt(inserts.inserts),
          fmt(inserts.seconds, 2),
          fmt(inserts.insertsPerSecond),
          fmt(inserts.latencyMs.p50, 2),
          fmt(inserts.latencyMs.p99, 2),
          fmt(inserts.latencyMs.max, 1),
          '-',
        ],
      ],
    ),
  );
  out.push(
    `  At the last answer: ${backlog.unpublishedOutboxRows} outbox rows unpublished, the keys service had applied ${backlog.keysAppliedUsageEvents} of ${warmUsages + run.ok} usage events; the last key's spend was complete ${fmt(report.endToEnd.lagAfterLastAnswerMs)} ms after the last answer.`,
  );
  out.push(`  ${postgresServerLine(inserts)}`);
  out.push('', ...cpuSection(report, e2e));
  return out;
}
