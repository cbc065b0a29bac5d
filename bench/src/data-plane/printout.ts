import { table } from '@switchboard/testkit/text-table';
import { benchHeader, fmt } from '../report.js';
import { durationSeconds } from '../scenarios.js';
import type { Summary } from './drive.js';
import { type DataPlaneMeasured, type DataPlaneReport, platformCpuMicros, platformProcesses } from './results.js';
import { answerTokens, concurrency, lowInFlight, lowLoadSeconds, pacedPauseMs, pacedSeconds, stageSeconds, topUpUsd } from './settings.js';

const cpuNames = [...platformProcesses, 'upstream', 'bench'];
const comparisonHeader = ['run', 'direct req/s', 'direct p50', 'direct p99', 'front req/s', 'front p50', 'front p99', 'added p50', 'added p99', 'failed'];

/** A difference of milliseconds with its sign: what the platform adds (or, by noise, takes away). */
const signedMs = (ms: number) => `${ms < 0 ? '' : '+'}${ms.toFixed(2)}`;

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
    signedMs(front.latencyMs.p50 - direct.latencyMs.p50),
    signedMs(front.latencyMs.p99 - direct.latencyMs.p99),
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
    `    at ${concurrency} in flight, front − direct: non-streaming p50 ${signedMs(front.latencyMs.p50 - direct.latencyMs.p50)} ms, p99 ${signedMs(front.latencyMs.p99 - direct.latencyMs.p99)} ms (queueing: mean latency = ${concurrency} ÷ req/s)`,
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
  const pacedRows = [
    [variants.direct, variants.front],
    [variants.directStream, variants.frontStream],
  ].map(([direct, front]) =>
    comparisonRow(`1 in flight, ${pacedPauseMs} ms pause after each, ${front.stream ? 'streaming' : 'non-streaming'}`, paced[direct.name], paced[front.name]),
  );
  return [
    `Latency at low load (${lowLoadSeconds} s measured per target, interleaved in halves)`,
    table(comparisonHeader, lowRows),
    `  Paced (${pacedSeconds} s per target; the asynchronous work a request leaves behind is done before the next one, and every hop wakes an idle process):`,
    table(comparisonHeader, pacedRows),
  ];
}

function keyLimitsSection(report: DataPlaneReport, m: DataPlaneMeasured): string[] {
  const { keyLimits } = report;
  const { variants } = m.traffic;
  const rows = [concurrency, 1].flatMap((inFlight) =>
    [variants.front, variants.frontLimited].map((v) => {
      const s = keyLimits.runs[`${inFlight}|${v.name}`];
      return [`${inFlight}: ${v.name}`, fmt(s.perSecond), fmt(s.latencyMs.p50, 2), fmt(s.latencyMs.p99, 2), fmt(s.latencyMs.max, 1), fmt(s.failed)];
    }),
  );
  return [
    'A key with every limit set (scopes, expiry, allowed models, requests/tokens/concurrency limits, day/week/month/total budgets; none reached) next to the key without, interleaved',
    table(['run (in flight: target)', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'failed'], rows),
    `    with ÷ without, req/s at ${concurrency} in flight: ${keyLimits.ratioAtConcurrency.toFixed(3)}; at 1 in flight with − without: p50 ${signedMs(keyLimits.addedAtOneMs.p50)} ms, p99 ${signedMs(keyLimits.addedAtOneMs.p99)} ms`,
  ];
}

function stagesSection(report: DataPlaneReport, m: DataPlaneMeasured): string[] {
  const { stages, lowLoad } = report;
  const { variants } = m.traffic;
  const [alone, modelsOnDataPlane, modelsThroughGateway] = Object.values(stages);
  const direct = lowLoad[`1|${variants.direct.name}`];
  const front = lowLoad[`1|${variants.front.name}`];
  const delta = (a: Summary, b: Summary) =>
    `p50 +${(a.latencyMs.p50 - b.latencyMs.p50).toFixed(2)} ms, p99 +${(a.latencyMs.p99 - b.latencyMs.p99).toFixed(2)} ms`;
  return [
    `The steps of a front-door request alone, 1 in flight, ${stageSeconds} s each, from this process`,
    table(['step', 'calls/s', 'p50 ms', 'p99 ms', 'max ms', 'failed'], Object.values(stages).map(summaryRow)),
    `    the data plane alone − direct (1 in flight above): ${delta(alone, direct)}; the front door − the data plane alone: ${delta(front, alone)}`,
    `    the gateway's hop on GET /v1/models (through the gateway − on the data plane): ${delta(modelsThroughGateway, modelsOnDataPlane)}`,
  ];
}

function cpuSection(report: DataPlaneReport, m: DataPlaneMeasured): string[] {
  const { throughput, lowLoad, stages, postgresPerFrontRequest: pg, rpcPerFrontRequest: rpc } = report;
  const { variants } = m.traffic;
  const { cpus } = report.machine;
  const cpuRow = (label: string, s: Summary) => {
    const ours = Object.values(s.cpu.processes).reduce((sum, percent) => sum + percent, 0);
    const other = Math.max(0, Math.round(s.cpu.hostBusyPercent * cpus) - ours);
    return [
      label,
      fmt(s.perSecond),
      ...cpuNames.map((name) => fmt(s.cpuMicrosPerRequest[name])),
      fmt(platformCpuMicros(s)),
      fmt(s.cpu.hostBusyPercent),
      fmt(other),
    ];
  };
  const at = (inFlight: number | string, s: Summary) => cpuRow(`${inFlight}: ${s.variant}`, s);
  const cpuRows: string[][] = [
    ...[variants.direct, variants.front, variants.fast, variants.directStream, variants.frontStream].map((v) => at(concurrency, throughput[v.name])),
    ...[variants.direct, variants.front, variants.fast].map((v) => at(1, lowLoad[`1|${v.name}`])),
    ...Object.values(stages).map((st) => cpuRow(`1: step: ${st.variant.split(' (')[0].slice(0, 60)}`, st)),
  ];
  const perCore = [variants.front, variants.fast, variants.frontStream, variants.direct].map((v) => {
    const s = throughput[v.name];
    const processes = Object.entries(s.cpu.processes)
      .map(([name, percent]) => `${name} ${percent}%`)
      .join(', ');
    return `    ${concurrency}: ${v.name}: ${processes}; host ${s.cpu.hostBusyPercent}% of ${cpus} cores`;
  });
  return [
    'CPU per request (µs of CPU per complete answer, per process; postgres = the backends of the bench database; platform = every process but the upstream and this one; host% = all cores, every process on it; other = host CPU not in the columns, % of one core)',
    table(['run (in flight: target)', 'req/s', ...cpuNames, 'platform', 'host%', 'other%'], cpuRows),
    '  CPU % of one core during the same runs:',
    ...perCore,
    `  Postgres per front-door request (pg_stat_database over ${pg.span}; idle pollers included): ${pg.transactions} transactions, ${pg.inserted} rows inserted, ${pg.updated} updated`,
    `  RPCs per front-door request (the services' rpc_server_duration_seconds counts over the same span; background refreshes and leases included): ${rpc.total}${
      Object.keys(rpc.byRpc).length
        ? ` (${Object.entries(rpc.byRpc)
            .map(([name, per]) => `${name} ${per}`)
            .join(', ')})`
        : ''
    }`,
  ];
}

function billingSection(report: DataPlaneReport): string[] {
  const b = report.billing;
  const r = report.requests;
  const lines = [
    `Billing: workspace balance ${b.balanceAtStart} at sign-up, ${b.balanceAfterTopUp} after the ${topUpUsd} sandbox top-up, ${b.balanceAtEnd} at the end; the platform answered costs summing to ${b.costsAnswered} USD for ${r.frontDoor + r.dataPlaneAlone} requests and the usage records the steps published (tiers ${JSON.stringify(b.tiers)}); the key's month-to-date spend ${b.keySpendAtStart} → ${b.keySpendAtEnd}, settled ${b.settledAfterMs} ms after the load`,
    `Requests: ${r.direct} direct, ${r.frontDoor} through the front door, ${r.dataPlaneAlone} to the data plane alone; the upstream got ${r.upstreamCalls} calls (warm-ups and first requests included)`,
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
    ...keyLimitsSection(report, m),
    '',
    ...stagesSection(report, m),
    '',
    ...cpuSection(report, m),
    '',
    ...billingSection(report),
  ];
}
