import { table } from '@switchboard/testkit/text-table';
import { round } from '../measure/latency.js';
import { benchHeader, fmt } from '../report.js';
import { durationSeconds } from '../scenarios.js';
import type { Summary } from './drive.js';
import type { DataPlaneMeasured, DataPlaneReport } from './results.js';
import { answerTokens, concurrency, lowInFlight, lowLoadSeconds, pacedPauseMs, pacedSeconds, stageSeconds, topUpUsd } from './settings.js';

const cpuNames = ['gateway', 'data-plane', 'keys', 'billing', 'conversations', 'postgres', 'nats-server', 'upstream', 'bench'];
const meshNames = ['gateway', 'data-plane', 'keys', 'billing', 'conversations', 'postgres', 'nats-server'];
const comparisonHeader = ['run', 'direct req/s', 'direct p50', 'direct p99', 'front req/s', 'front p50', 'front p99', 'added p50', 'added p99', 'failed'];

/** A run's rate, latencies and failures: a row of the throughput and steps tables. */
const summaryRow = (s: Summary) => [s.variant, fmt(s.perSecond), fmt(s.latencyMs.p50, 2), fmt(s.latencyMs.p99, 2), fmt(s.latencyMs.max, 1), fmt(s.failed)];

/** One row of a latency comparison: direct and front door, and what the front door adds (front − direct). */
function comparisonRow(label: string, direct: Summary, front: Summary, countDirectFailures = true): string[] {
  return [
    label,
    fmt(direct.perSecond),
    fmt(direct.latencyMs.p50, 2),
    fmt(direct.latencyMs.p99, 2),
    fmt(front.perSecond),
    fmt(front.latencyMs.p50, 2),
    fmt(front.latencyMs.p99, 2),
    `+${(front.latencyMs.p50 - direct.latencyMs.p50).toFixed(2)}`,
    `+${(front.latencyMs.p99 - direct.latencyMs.p99).toFixed(2)}`,
    fmt(front.failed + (countDirectFailures ? direct.failed : 0)),
  ];
}

function throughputSection(report: DataPlaneReport, m: DataPlaneMeasured): string[] {
  const { throughput, ratios } = report;
  const { variants } = m.traffic;
  const ratioCell = (ratio?: number) => (ratio === undefined ? '-' : ratio.toFixed(2));
  const row = (s: Summary, ratio?: number) => [...summaryRow(s), ratioCell(ratio)];
  const front = throughput[variants.front.name];
  const direct = throughput[variants.direct.name];
  return [
    `Throughput, ${concurrency} requests in flight (${durationSeconds} s measured per target; direct/front interleaved in halves)`,
    table(
      ['target', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'failed', 'front ÷ direct'],
      [
        row(direct),
        row(front, ratios.nonStreaming),
        row(throughput[variants.fast.name], ratios.fastNonStreaming),
        row(throughput[variants.directStream.name]),
        row(throughput[variants.frontStream.name], ratios.streaming),
      ],
    ),
    `    at ${concurrency} in flight, front − direct: non-streaming p50 +${round(front.latencyMs.p50 - direct.latencyMs.p50)} ms, p99 +${round(front.latencyMs.p99 - direct.latencyMs.p99)} ms (queueing: mean latency = ${concurrency} ÷ req/s)`,
  ];
}

function lowLoadSection(report: DataPlaneReport, m: DataPlaneMeasured): string[] {
  const { lowLoad } = report;
  const paced = report.paced.runs;
  const { variants } = m.traffic;
  const lowRows: string[][] = [];
  for (const inFlight of lowInFlight) {
    for (const [direct, front] of [
      [variants.direct, variants.front],
      [variants.directStream, variants.frontStream],
    ] as const) {
      const d = lowLoad[`${inFlight}|${direct.name}`];
      lowRows.push(comparisonRow(`${inFlight} in flight, ${front.stream ? 'streaming' : 'non-streaming'}`, d, lowLoad[`${inFlight}|${front.name}`]));
    }
  }
  lowRows.push(comparisonRow('1 in flight, service/fast (vs direct above)', lowLoad[`1|${variants.direct.name}`], lowLoad[`1|${variants.fast.name}`], false));
  const pacedRows = [variants.front, variants.frontStream].map((variant) =>
    comparisonRow(
      `1 in flight, ${pacedPauseMs} ms pause after each, ${variant.stream ? 'streaming' : 'non-streaming'} (direct: non-streaming)`,
      paced[variants.direct.name],
      paced[variant.name],
    ),
  );
  return [
    `Latency at low load (${lowLoadSeconds} s measured per target, interleaved in halves)`,
    table(comparisonHeader, lowRows),
    `  Paced (${pacedSeconds} s per target; the asynchronous work a request leaves behind is done before the next one, and every hop wakes an idle process):`,
    table(comparisonHeader, pacedRows),
  ];
}

function stagesSection(report: DataPlaneReport): string[] {
  return [
    `The steps of a front-door request alone, 1 in flight, ${stageSeconds} s each, from this process (the data plane's clients: Connect binary over h2c)`,
    table(['step', 'calls/s', 'p50 ms', 'p99 ms', 'max ms', 'failed'], Object.values(report.stages).map(summaryRow)),
  ];
}

function cpuSection(report: DataPlaneReport, m: DataPlaneMeasured): string[] {
  const { throughput, lowLoad, stages, postgresPerFrontRequest: pg } = report;
  const { variants } = m.traffic;
  const { cpus } = report.machine;
  const cpuRow = (label: string, s: Summary) => {
    const ours = Object.values(s.cpu.processes).reduce((sum, percent) => sum + percent, 0);
    const other = Math.max(0, Math.round(s.cpu.hostBusyPercent * cpus) - ours);
    const meshTotal = meshNames.reduce((sum, name) => sum + (s.cpuMicrosPerRequest[name] ?? 0), 0);
    return [label, fmt(s.perSecond), ...cpuNames.map((name) => fmt(s.cpuMicrosPerRequest[name])), fmt(meshTotal), fmt(s.cpu.hostBusyPercent), fmt(other)];
  };
  const at = (inFlight: number | string, s: Summary) => cpuRow(`${inFlight}: ${s.variant}`, s);
  const cpuRows: string[][] = [
    ...[variants.direct, variants.front, variants.fast, variants.directStream, variants.frontStream].map((v) => at(concurrency, throughput[v.name])),
    ...[variants.direct, variants.front, variants.fast].map((v) => at(1, lowLoad[`1|${v.name}`])),
    ...Object.values(stages).map((st) => cpuRow(`1: step: ${st.variant.split(' (')[0]}`, st)),
  ];
  const perCore = [variants.front, variants.fast, variants.frontStream, variants.direct].map((v) => {
    const s = throughput[v.name];
    const processes = Object.entries(s.cpu.processes)
      .map(([name, percent]) => `${name} ${percent}%`)
      .join(', ');
    return `    ${concurrency}: ${v.name}: ${processes}; host ${s.cpu.hostBusyPercent}% of ${cpus} cores`;
  });
  return [
    'CPU per request (µs of CPU per complete answer, per process; postgres = the backends of the bench database; host% = all cores, every process on it; other = host CPU not in the columns, % of one core)',
    table(['run (in flight: target)', 'req/s', ...cpuNames, 'mesh total', 'host%', 'other%'], cpuRows),
    '  CPU % of one core during the same runs:',
    ...perCore,
    `  Postgres per front-door request (pg_stat_database over ${pg.span}; idle pollers included): ${pg.transactions} transactions, ${pg.inserted} rows inserted, ${pg.updated} updated`,
  ];
}

function billingSection(report: DataPlaneReport): string[] {
  const b = report.billing;
  const r = report.requests;
  const lines = [
    `Billing: workspace balance ${b.balanceAtStart} at sign-up, ${b.balanceAfterTopUp} after the ${topUpUsd} sandbox top-up, ${b.balanceAtEnd} at the end; the front door answered costs summing to ${b.frontDoorCostsAnswered} USD for ${r.frontDoor} requests (tiers ${JSON.stringify(b.tiers)}); the key's month-to-date spend ${b.keySpendAtStart} → ${b.keySpendAtEnd}`,
    `Requests: ${r.direct} direct, ${r.frontDoor} through the front door; the upstream got ${r.upstreamCalls} calls (warm-ups and first requests included)`,
  ];
  if (report.warnings.length) lines.push('', 'Warnings and errors the mesh logged (first 3 per component):', ...report.warnings.map((line) => `  ${line}`));
  return lines;
}

/** What bench:data-plane prints above its targets. */
export function dataPlanePrintout(report: DataPlaneReport, m: DataPlaneMeasured): string[] {
  return [
    ...benchHeader('data-plane', report.at, report.machine, 'the load generator is this process and the upstream its child'),
    `  POST /v1/chat/completions, ${answerTokens}-token answers (max_tokens ${answerTokens}); keep-alive http.Agent per target; upstream: OpenAiUpstream in its own process`,
    '',
    ...throughputSection(report, m),
    '',
    ...lowLoadSection(report, m),
    '',
    ...stagesSection(report),
    '',
    ...cpuSection(report, m),
    '',
    ...billingSection(report),
  ];
}
