import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { table } from '@switchboard/testkit/text-table';
import type { InsertLoopResult } from './measure/inserts.js';
import { round } from './measure/latency.js';
import type { LoadResult } from './measure/load.js';

/** bench/results/, where every bench writes its JSON. */
export const resultsDir = fileURLToPath(new URL('../results/', import.meta.url));

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
  comparison: '<' | '<=' | '>=';
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

export function check(name: string, value: number, comparison: TargetCheck['comparison'], limit: number, unit: string): TargetCheck {
  const pass = comparison === '<' ? value < limit : comparison === '<=' ? value <= limit : value >= limit;
  return { name, value, comparison, limit, unit, pass };
}

export const fmt = (value: number | undefined, digits = 0) => (value === undefined || Number.isNaN(value) ? '-' : value.toFixed(digits));
const verdict = (pass: boolean) => (pass ? 'PASS' : 'FAIL');

/** One scenario of `npm run bench`: the mesh, each baseline and the insert loop, then the CPU of each measured run. */
function scenarioSection(scenario: ScenarioReport, inserts: InsertLoopResult | undefined): string[] {
  const out: string[] = [];
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
  return out;
}

/** The host, the setup and the memory table of `npm run bench`. */
function setupSection(report: BenchReport): string[] {
  const { host } = report;
  return [
    `Switchboard bench  ${report.startedAt}`,
    `  node ${host.node}, ${host.platform}, ${host.cpus} CPU (${host.cpuModel}), ${host.memoryGb} GB RAM, load avg at start ${host.loadAverage.map((l) => l.toFixed(2)).join(' ')}`,
    `  ${Object.entries(report.setup)
      .map(([k, v]) => `${k}=${v}`)
      .join(', ')}`,
    '',
    'Memory (MB; idle = VmRSS 2 s after ready, peak = VmHWM after the load)',
    table(
      ['process', 'pid', 'idle RSS', 'peak RSS'],
      [
        ...report.memory.map((m) => [m.counted ? m.name : `${m.name} (not in total)`, String(m.pid ?? '-'), fmt(m.idleRssMb, 1), fmt(m.peakRssMb, 1)]),
        ['mesh total (services + gateway)', '', fmt(report.idleMeshTotalMb, 1), fmt(report.peakMeshTotalMb, 1)],
      ],
    ),
  ];
}

/** The printout of `npm run bench`. */
export function formatReport(report: BenchReport): string {
  const out = [...setupSection(report), ''];
  for (const scenario of report.scenarios) out.push(...scenarioSection(scenario, report.postgresInserts), '');
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

/** Writes `report` as `<directory>/<name>-<at, ':' and '.' as '-'>.json` (no name: `<at>.json`); the file's path. */
export async function writeResultFile(name: string | undefined, at: string, report: unknown, directory = resultsDir): Promise<string> {
  await mkdir(directory, { recursive: true });
  const file = path.join(directory, `${name ? `${name}-` : ''}${at.replace(/[:.]/g, '-')}.json`);
  await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
  return file;
}

/** Writes the report as bench/results/<ISO timestamp, ':' and '.' as '-'>.json. */
export function writeReport(report: BenchReport, directory: string): Promise<string> {
  return writeResultFile(undefined, report.startedAt, report, directory);
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
  const file = await writeResultFile(input.name, input.at, report, input.resultsDir);
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
  return {
    cpus: os.cpus().length,
    model: os.cpus()[0]?.model.trim(),
    node: process.version,
    loadAverageAtStart,
    loadAverageAtEnd: os.loadavg().map((l) => round(l)),
  };
}

/**
 * The first lines of a bench's printout: its name and start, the machine, the load average (at
 * the end too when `atEnd`), and what else runs on the cores (`sharing`).
 */
export function benchHeader(name: string, at: string, machine: ReturnType<typeof machineFacts>, sharing: string, atEnd = true): string[] {
  return [
    `Switchboard bench:${name}  ${at}`,
    `  node ${machine.node}, ${machine.cpus} CPU (${machine.model}), load avg at start ${machine.loadAverageAtStart.join(' ')}${atEnd ? `, at end ${machine.loadAverageAtEnd.join(' ')}` : ''}; ${sharing}, on the same cores`,
  ];
}
