/**
 * `npm run bench`: boots the whole mesh on free ports, measures its idle memory, runs the load
 * scenarios against the gateway and against a single-process baseline doing the same work, a
 * raw Postgres insert loop as a second reference, then peak memory; prints a table and writes
 * bench/results/<timestamp>.json. Exits non-zero only when something crashed or could not be
 * measured; a missed target is reported as FAIL.
 *
 * Isolation: unless NATS_URL / DATABASE_URL are set, the bench starts its own nats-server in
 * its temp dir (so its consumers never take events from another dev mesh on :4222) and gives
 * the mesh its own database (dropped at the end) on the Postgres startMesh finds.
 *
 * Load only ever goes to 127.0.0.1; every run is bounded in time and request count, and a
 * watchdog ends the whole bench if it overruns.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Component, components, type Mesh, startMesh } from '@switchboard/runtime/dev/mesh';
import { dropDatabase, isPortOpen, startNatsServer } from '@switchboard/runtime/infra';
import pg from 'pg';
import { type BaselineServer, runInsertLoop, startBaselineServer } from './baselines.js';
import { runLoad, type Target } from './load.js';
import { readMemory, roundMb } from './proc.js';
import { type BenchReport, check, formatReport, type MemoryRow, type ScenarioReport, writeReport } from './report.js';
import { type BenchContext, type Scenario, scenarios } from './scenarios.js';

const idleSettleMs = 2_000;
const idleMeshLimitMb = 600;
const insertLoop = { concurrency: 16, maxInserts: 200_000, maxSeconds: 5, warmupInserts: 1_000 };
const baselinePoolMax = 10; // identity's knex pool (runtime/src/db.ts)
const resultsDir = fileURLToPath(new URL('../results/', import.meta.url));

const progress = (message: string) => process.stderr.write(`[bench] ${message}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Forwards the mesh's error lines (level ≥ 50) to stderr, at most this many. */
const maxForwardedLines = 40;

function canonical(value: unknown): string {
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Calls a target once; it must answer 2xx before any load is sent to it. */
async function probe(target: Target): Promise<unknown> {
  const response = await fetch(target.url, { method: target.method ?? 'GET', headers: target.headers, body: target.body, signal: AbortSignal.timeout(10_000) });
  const text = await response.text();
  if (response.status < 200 || response.status > 299)
    throw new Error(`${target.method ?? 'GET'} ${target.url} answered ${response.status}: ${text.slice(0, 500)}`);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

class Bench {
  readonly report: BenchReport;
  private readonly cleanups: Array<{ name: string; run: () => Promise<void> }> = [];
  private cleaned?: Promise<void>;
  private mesh?: Mesh;
  private baseline?: BaselineServer;
  private natsPid?: number;
  private forwarded = 0;

  constructor() {
    const cpus = os.cpus();
    this.report = {
      startedAt: new Date().toISOString(),
      host: {
        node: process.version,
        platform: `${os.platform()} ${os.release()}`,
        cpus: cpus.length,
        cpuModel: cpus[0]?.model.trim() ?? 'unknown',
        memoryGb: Math.round(os.totalmem() / 2 ** 30),
        loadAverage: os.loadavg(),
      },
      setup: {},
      memory: [],
      scenarios: [],
      targets: [],
      errors: [],
    };
  }

  /** Registers something to undo; cleanup runs them last-in first-out. */
  private defer(name: string, run: () => Promise<void>) {
    this.cleanups.push({ name, run });
  }

  cleanup(): Promise<void> {
    this.cleaned ??= (async () => {
      for (const { name, run } of this.cleanups.reverse()) {
        try {
          await run();
        } catch (err) {
          this.report.errors.push(`cleanup (${name}): ${(err as Error).message}`);
        }
      }
    })();
    return this.cleaned;
  }

  async run(): Promise<void> {
    if (!existsSync('/proc/self/status')) throw new Error('the bench reads memory and CPU from /proc: it runs on Linux only');
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-'));
    this.defer('temp dir', () => rm(dataDir, { recursive: true, force: true }));

    if (process.env.NATS_URL) {
      this.report.setup.nats = 'NATS_URL';
    } else {
      try {
        const nats = await startNatsServer(path.join(dataDir, 'nats'));
        this.natsPid = nats.process.pid;
        this.defer('nats-server', () => nats.stop!());
        process.env.NATS_URL = nats.url;
        this.report.setup.nats = 'own nats-server';
      } catch (err) {
        // No nats-server binary: let startMesh find one (127.0.0.1:4222 or a container).
        progress(`could not start a nats-server of its own (${(err as Error).message}); using the mesh's discovery`);
        this.report.setup.nats = 'discovered by startMesh';
      }
    }

    const database = `switchboard_bench_${process.pid}_${Date.now().toString(36)}`;
    if (process.env.DATABASE_URL) {
      this.report.setup.postgres = 'DATABASE_URL';
    } else if (await isPortOpen('127.0.0.1', 5432)) {
      // startMesh creates postgres://postgres@127.0.0.1:5432/<database> (runtime/src/infra.ts).
      this.defer('bench database', () => dropDatabase(`postgres://postgres@127.0.0.1:5432/${database}`));
      this.report.setup.postgres = `127.0.0.1:5432, database ${database} (dropped after)`;
    } else {
      this.report.setup.postgres = 'embedded (temp dir)';
    }
    this.report.setup.logLevel = 'warn';
    this.report.setup.baseline = 'fastify child process (own event loop, like the gateway); autocannon runs in the bench process';

    progress('starting the mesh');
    const meshStarted = performance.now();
    const mesh = await startMesh({
      dataDir,
      randomPorts: true,
      database,
      // BENCH_NODE_FLAGS: extra flags for every component, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
      nodeFlags: process.env.BENCH_NODE_FLAGS?.split(' ').filter(Boolean),
      env: { LOG_LEVEL: 'warn' },
      onLine: (component, line) => this.forward(component, line),
    });
    this.mesh = mesh;
    this.defer('mesh', () => mesh.stop());
    this.report.setup.meshStartSeconds = Math.round((performance.now() - meshStarted) / 100) / 10;
    progress(`mesh ready at ${mesh.gatewayUrl} in ${this.report.setup.meshStartSeconds} s`);

    // A measurement, not a synchronisation: let start-up work (JIT, GC, pools) settle.
    await sleep(idleSettleMs);
    this.measureIdle();

    progress('starting the baseline server');
    const baseline = await startBaselineServer({
      databaseUrl: mesh.env.DATABASE_URL,
      jwksUrl: `${mesh.gatewayUrl}/v1/.well-known/jwks.json`,
      poolMax: baselinePoolMax,
    });
    this.baseline = baseline;
    this.defer('baseline server', () => baseline.stop());

    const ctx: BenchContext = { mesh, baselineUrl: baseline.url };
    for (const scenario of scenarios) {
      const result = await this.runScenario(scenario, ctx);
      this.report.scenarios.push(result);
      const dead = this.deadProcess();
      if (dead) {
        // Nothing after a crash would measure the mesh: report it (once) and stop.
        if (!result.error) this.report.errors.push(dead);
        return;
      }
    }

    this.measurePeak();

    progress(`raw Postgres insert loop (${insertLoop.maxInserts} rows or ${insertLoop.maxSeconds} s, concurrency ${insertLoop.concurrency})`);
    this.report.postgresInserts = await runInsertLoop({ databaseUrl: mesh.env.DATABASE_URL, ...insertLoop });
    this.report.setup.postgresServer = `${this.report.postgresInserts.server.version}, synchronous_commit=${this.report.postgresInserts.server.synchronousCommit}`;
  }

  private forward(component: Component, line: string) {
    if (!/"level":(5\d|6\d)/.test(line)) return;
    this.forwarded += 1;
    if (this.forwarded <= maxForwardedLines) process.stderr.write(`[${component}] ${line}\n`);
    else if (this.forwarded === maxForwardedLines + 1) process.stderr.write('[bench] (more error lines from the mesh are not shown)\n');
  }

  private memoryRow(name: string, pid: number | undefined, counted: boolean): MemoryRow {
    let row = this.report.memory.find((m) => m.name === name);
    if (!row) {
      row = { name, pid, counted };
      this.report.memory.push(row);
    }
    return row;
  }

  private measureIdle() {
    const mesh = this.mesh!;
    let total = 0;
    for (const component of components) {
      const memory = readMemory(mesh.pid(component));
      if (!memory) throw new Error(`${component} is not running: ${mesh.output(component).split('\n').slice(-10).join('\n')}`);
      this.memoryRow(component, memory.pid, true).idleRssMb = memory.rssMb;
      total += memory.rssMb;
    }
    const nats = readMemory(this.natsPid);
    if (nats) this.memoryRow('nats-server', nats.pid, false).idleRssMb = nats.rssMb;
    this.report.idleMeshTotalMb = roundMb(total);
    this.report.targets.push(check('idle mesh RSS total', this.report.idleMeshTotalMb, '<', idleMeshLimitMb, 'MB'));
    progress(`idle mesh RSS ${this.report.idleMeshTotalMb} MB`);
  }

  private measurePeak() {
    const mesh = this.mesh!;
    let total = 0;
    for (const component of components) {
      const memory = readMemory(mesh.pid(component));
      if (!memory) continue; // deadProcess reports it
      this.memoryRow(component, memory.pid, true).peakRssMb = memory.hwmMb;
      total += memory.hwmMb;
    }
    this.report.peakMeshTotalMb = roundMb(total);
    const baseline = readMemory(this.baseline?.pid);
    if (baseline) this.memoryRow('baseline (fastify+pg)', baseline.pid, false).peakRssMb = baseline.hwmMb;
    const nats = readMemory(this.natsPid);
    if (nats) this.memoryRow('nats-server', nats.pid, false).peakRssMb = nats.hwmMb;
  }

  /**
   * The Postgres backends serving the bench database (their CPU is the database's share of a
   * run), when Postgres runs on this host; none otherwise.
   */
  private async postgresBackends(): Promise<number[]> {
    const url = this.mesh?.env.DATABASE_URL;
    if (!url || !['127.0.0.1', 'localhost'].includes(new URL(url).hostname)) return [];
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
    try {
      await client.connect();
      const { rows } = await client.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
      );
      return rows.map((row) => row.pid);
    } catch {
      return [];
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** A component or the baseline that exited during the run (a crash), if any. */
  private deadProcess(): string | undefined {
    for (const component of components) {
      if (!readMemory(this.mesh!.pid(component))) {
        return `${component} exited during the bench:\n${this.mesh!.output(component).split('\n').slice(-20).join('\n')}`;
      }
    }
    if (this.baseline?.exited()) return `the baseline server exited during the bench:\n${this.baseline.output().slice(-2000)}`;
    return undefined;
  }

  private async runScenario(scenario: Scenario, ctx: BenchContext): Promise<ScenarioReport> {
    const report: ScenarioReport = {
      name: scenario.name,
      description: scenario.description,
      connections: scenario.connections,
      durationSeconds: scenario.durationSeconds,
      warmupSeconds: scenario.warmupSeconds,
      baselines: [],
    };
    const shape = { connections: scenario.connections, durationSeconds: scenario.durationSeconds, warmupSeconds: scenario.warmupSeconds };
    try {
      progress(`scenario ${scenario.name}: setup`);
      const target = await scenario.setup(ctx);
      const baselines = scenario.baselines?.(ctx, target) ?? [];
      const meshAnswer = await probe(target);
      const answers = await Promise.all(baselines.map((b) => probe(b.target)));
      const primaryIndex = baselines.findIndex((b) => b.primary);
      if (primaryIndex >= 0) report.sameResponse = canonical(meshAnswer) === canonical(answers[primaryIndex]);

      progress(`scenario ${scenario.name}: mesh, ${shape.connections} connections, ${shape.warmupSeconds} s + ${shape.durationSeconds} s`);
      report.mesh = await runLoad(target, shape, async () => ({
        ...Object.fromEntries(components.map((component) => [component, [ctx.mesh.pid(component)]])),
        'nats-server': [this.natsPid],
        postgres: await this.postgresBackends(),
      }));
      const dead = this.deadProcess();
      if (dead) throw new Error(dead);
      for (const baseline of baselines) {
        progress(`scenario ${scenario.name}: baseline "${baseline.name}"`);
        const result = await runLoad(baseline.target, shape, async () => ({
          baseline: [this.baseline?.pid],
          postgres: await this.postgresBackends(),
        }));
        report.baselines.push({
          name: baseline.name,
          primary: Boolean(baseline.primary),
          result,
          ratio: result.rps > 0 ? Math.round((report.mesh.rps / result.rps) * 1000) / 1000 : undefined,
        });
      }
      const primary = report.baselines.find((b) => b.primary);
      report.ratio = primary?.ratio;
      if (scenario.minRatio !== undefined) {
        this.report.targets.push(check(`${scenario.name}: mesh req/s ÷ baseline req/s`, report.ratio ?? 0, '>=', scenario.minRatio, 'ratio'));
      }
    } catch (err) {
      report.error = (err as Error).message;
      this.report.errors.push(`scenario ${scenario.name}: ${report.error}`);
    }
    return report;
  }

  /** Ratios to the insert rate, once it is measured (after the load, so they do not compete). */
  finish() {
    const inserts = this.report.postgresInserts?.insertsPerSecond;
    for (const scenario of this.report.scenarios) {
      if (scenario.mesh && inserts) scenario.ratioToInserts = Math.round((scenario.mesh.rps / inserts) * 1000) / 1000;
    }
    this.report.finishedAt = new Date().toISOString();
  }
}

async function main(): Promise<number> {
  const bench = new Bench();
  // Generous: start-up, every scenario twice-plus over, the insert loop and the stops.
  const budgetMs = 180_000 + scenarios.reduce((sum, s) => sum + (s.warmupSeconds + s.durationSeconds) * 1000 * 4, 0);
  let interrupted: string | undefined;
  const interrupt = (reason: string, code: number) => {
    if (interrupted) return;
    interrupted = reason;
    bench.report.errors.push(reason);
    progress(`${reason}: stopping everything`);
    void bench.cleanup().finally(() => process.exit(code));
  };
  const watchdog = setTimeout(() => interrupt(`watchdog: the bench ran over ${budgetMs / 1000} s`, 3), budgetMs);
  watchdog.unref();
  process.once('SIGINT', () => interrupt('interrupted (SIGINT)', 130));
  process.once('SIGTERM', () => interrupt('terminated (SIGTERM)', 143));

  try {
    await bench.run();
  } catch (err) {
    bench.report.errors.push((err as Error).stack ?? String(err));
  }
  progress('stopping everything');
  await bench.cleanup();
  clearTimeout(watchdog);
  bench.finish();
  console.log(formatReport(bench.report));
  try {
    const file = await writeReport(bench.report, resultsDir);
    console.log(`\nWrote ${path.relative(process.cwd(), file)}`);
  } catch (err) {
    bench.report.errors.push(`writing the results: ${(err as Error).message}`);
  }
  return bench.report.errors.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
