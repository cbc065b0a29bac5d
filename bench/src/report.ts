import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { table } from '@switchboard/testkit/text-table';
import type { InsertLoopResult } from './baselines.js';
import type { LoadResult } from './load.js';

// The benches' tables are the shared test library's (the chaos report prints them too).
export { table };

export interface MemoryRow {
  name: string;
  pid?: number;
  /** VmRSS a few seconds after the mesh was ready. */
  idleRssMb?: number;
  /** VmHWM after the load. */
  peakRssMb?: number;
  /** Part of the idle-mesh total (the services and the gateway). */
  counted: boolean;
}

export interface TargetCheck {
  name: string;
  value: number;
  comparison: '<' | '>=';
  limit: number;
  unit: string;
  pass: boolean;
}

export interface ScenarioReport {
  name: string;
  description: string;
  connections: number;
  durationSeconds: number;
  warmupSeconds: number;
  mesh?: LoadResult;
  baselines: Array<{ name: string; primary: boolean; result?: LoadResult; ratio?: number }>;
  /** Mesh req/s ÷ the primary baseline's req/s. */
  ratio?: number;
  /** Mesh req/s ÷ raw Postgres inserts/s. */
  ratioToInserts?: number;
  /** Whether the mesh and the primary baseline answered the same JSON to the first request. */
  sameResponse?: boolean;
  error?: string;
}

export interface BenchReport {
  startedAt: string;
  finishedAt?: string;
  host: { node: string; platform: string; cpus: number; cpuModel: string; memoryGb: number; loadAverage: number[] };
  setup: Record<string, string | number | boolean>;
  memory: MemoryRow[];
  idleMeshTotalMb?: number;
  peakMeshTotalMb?: number;
  scenarios: ScenarioReport[];
  postgresInserts?: InsertLoopResult;
  targets: TargetCheck[];
  /** Crashes and failures: any makes the run exit non-zero. */
  errors: string[];
}

export function check(name: string, value: number, comparison: '<' | '>=', limit: number, unit: string): TargetCheck {
  return { name, value, comparison, limit, unit, pass: comparison === '<' ? value < limit : value >= limit };
}

export const fmt = (value: number | undefined, digits = 0) => (value === undefined || Number.isNaN(value) ? '-' : value.toFixed(digits));
const verdict = (pass: boolean) => (pass ? 'PASS' : 'FAIL');

export function formatReport(report: BenchReport): string {
  const out: string[] = [];
  const { host } = report;
  out.push(`Switchboard bench  ${report.startedAt}`);
  out.push(
    `  node ${host.node}, ${host.platform}, ${host.cpus} CPU (${host.cpuModel}), ${host.memoryGb} GB RAM, load avg at start ${host.loadAverage.map((l) => l.toFixed(2)).join(' ')}`,
  );
  out.push(
    `  ${Object.entries(report.setup)
      .map(([k, v]) => `${k}=${v}`)
      .join(', ')}`,
  );
  out.push('');

  out.push('Memory (MB; idle = VmRSS 2 s after ready, peak = VmHWM after the load)');
  out.push(
    table(
      ['process', 'pid', 'idle RSS', 'peak RSS'],
      [
        ...report.memory.map((m) => [m.counted ? m.name : `${m.name} (not in total)`, String(m.pid ?? '-'), fmt(m.idleRssMb, 1), fmt(m.peakRssMb, 1)]),
        ['mesh total (services + gateway)', '', fmt(report.idleMeshTotalMb, 1), fmt(report.peakMeshTotalMb, 1)],
      ],
    ),
  );
  out.push('');

  for (const scenario of report.scenarios) {
    out.push(`Scenario ${scenario.name}: ${scenario.description}`);
    out.push(`  ${scenario.connections} connections, ${scenario.durationSeconds} s measured after ${scenario.warmupSeconds} s warm-up`);
    if (scenario.error) out.push(`  ERROR: ${scenario.error}`);
    const row = (name: string, result: LoadResult | undefined, ratio: number | undefined) => [
      name,
      fmt(result?.rps),
      fmt(result?.latencyMs.p50, 1),
      fmt(result?.latencyMs.p99, 1),
      fmt(result?.non2xx),
      fmt(result === undefined ? undefined : result.errors + result.timeouts),
      ratio === undefined ? '-' : ratio.toFixed(2),
    ];
    const inserts = report.postgresInserts;
    out.push(
      table(
        ['target', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors', 'mesh ÷ it'],
        [
          row('mesh: gateway → identity', scenario.mesh, undefined),
          ...scenario.baselines.map((b) => row(`baseline: ${b.name}${b.primary ? ' *' : ''}`, b.result, b.ratio)),
          [
            'reference: raw Postgres single-row INSERTs',
            fmt(inserts?.insertsPerSecond),
            fmt(inserts?.latencyMs.p50, 2),
            fmt(inserts?.latencyMs.p99, 2),
            '-',
            fmt(inserts?.errors),
            scenario.ratioToInserts === undefined ? '-' : scenario.ratioToInserts.toFixed(2),
          ],
        ],
      ),
    );
    const cpuLine = (name: string, result: LoadResult | undefined) => {
      if (!result) return;
      const processes = Object.entries(result.cpu.processes)
        .filter(([, percent]) => percent > 0)
        .map(([process, percent]) => `${process} ${percent}%`)
        .join(', ');
      out.push(`    ${name}: ${processes}; host ${result.cpu.hostBusyPercent}% busy`);
    };
    out.push('  CPU during the measured runs (% of one core; postgres = the backends of the bench database; host = % of all cores, every process on it):');
    cpuLine('mesh', scenario.mesh);
    for (const b of scenario.baselines) cpuLine(`baseline${b.primary ? ' *' : ''} (${b.name})`, b.result);
    if (scenario.sameResponse !== undefined) out.push(`  mesh and baseline * answered ${scenario.sameResponse ? 'the same' : 'DIFFERENT'} JSON`);
    out.push('');
  }

  if (report.postgresInserts) {
    const p = report.postgresInserts;
    out.push(
      `Raw Postgres: ${p.inserts} single-row INSERTs (autocommit) in ${p.seconds} s at concurrency ${p.concurrency}: ${p.insertsPerSecond}/s, p50 ${p.latencyMs.p50} ms, p99 ${p.latencyMs.p99} ms, ${p.errors} errors`,
    );
    out.push('');
  }

  out.push('Targets');
  for (const t of report.targets) {
    out.push(
      `  ${verdict(t.pass)}  ${t.name}: ${fmt(t.value, t.unit === 'MB' ? 1 : 2)}${t.unit === 'MB' ? ' MB' : ''} (target ${t.comparison} ${t.limit}${t.unit === 'MB' ? ' MB' : ''})`,
    );
  }
  if (report.errors.length) {
    out.push('');
    out.push('Errors');
    for (const error of report.errors) out.push(`  ${error}`);
  }
  return out.join('\n');
}

/** Writes the report as bench/results/<ISO timestamp, ':' and '.' as '-'>.json. */
export async function writeReport(report: BenchReport, directory: string): Promise<string> {
  await mkdir(directory, { recursive: true });
  const file = path.join(directory, `${report.startedAt.replace(/[:.]/g, '-')}.json`);
  await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
  return file;
}

/**
 * The end of a bench run: the targets and errors under the printed tables, the time it took, and
 * the JSON report under bench/results/ (`<name>-<time>.json`). Exits non-zero on errors only: a
 * missed target prints FAIL.
 */
export async function finishBench(input: {
  name: string;
  lines: string[];
  targets: TargetCheck[];
  errors: string[];
  startedAt: number;
  at: string;
  resultsDir: string;
  report: { totalSeconds?: number };
}): Promise<number> {
  const { lines, targets, errors, report } = input;
  lines.push('', 'Targets');
  for (const t of targets) lines.push(`  ${t.pass ? 'PASS' : 'FAIL'}  ${t.name}: ${fmt(t.value, 2)} (target ${t.comparison} ${t.limit})`);
  if (errors.length) lines.push('', 'Errors', ...errors.map((error) => `  ${error}`));
  report.totalSeconds = Math.round((performance.now() - input.startedAt) / 1000);
  lines.push('', `bench:${input.name} took ${report.totalSeconds} s (mesh start included)`);
  console.log(lines.join('\n'));
  await mkdir(input.resultsDir, { recursive: true });
  const file = path.join(input.resultsDir, `${input.name}-${input.at.replace(/[:.]/g, '-')}.json`);
  await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`wrote ${path.relative(process.cwd(), file)}`);
  return errors.length ? 1 : 0;
}

/** Runs a bench's main and exits with its code (1 on a crash). */
export function runBench(main: () => Promise<number>): void {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}

/** The machine a bench ran on, for its JSON report: cores, CPU model, Node, and the load average around the run. */
export function machineFacts(loadAverageAtStart: number[]) {
  const round = (value: number) => Math.round(value * 100) / 100;
  return {
    cpus: os.cpus().length,
    model: os.cpus()[0]?.model.trim(),
    node: process.version,
    loadAverageAtStart,
    loadAverageAtEnd: os.loadavg().map(round),
  };
}
