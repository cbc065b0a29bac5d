import { existsSync } from 'node:fs';
import os from 'node:os';
import type { Component, Mesh } from '@switchboard/runtime/dev/mesh';
import { isPortOpen } from '@switchboard/runtime/infra';
import { measureInserts } from '../measure/inserts.js';
import { sleep } from '../measure/loop.js';
import { BenchSession, exitedComponents, startBenchMesh, startOwnNats } from '../measure/session.js';
import type { BenchReport } from '../report.js';
import { scenarios } from '../scenarios.js';
import { type BaselineServer, startBaselineServer } from './baseline-process.js';
import { measureIdle, measurePeak } from './memory.js';
import { runScenario, type ScenarioRig } from './scenario.js';

const idleSettleMs = 2_000;
const baselinePoolMax = 10; // identity's knex pool (runtime/src/db.ts)
/** Forwards the mesh's error lines (level ≥ 50) to stderr, at most this many. */
const maxForwardedLines = 40;

function emptyReport(): BenchReport {
  const cpus = os.cpus();
  return {
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

/** `npm run bench`: the steps of one run, in order (run.ts has the overview), and what they leave in `report`. */
export class Bench {
  readonly report = emptyReport();
  private session?: BenchSession;
  private mesh?: Mesh;
  private baseline?: BaselineServer;
  private natsPid?: number;
  private forwarded = 0;

  readonly progress = (message: string) => process.stderr.write(`[bench] ${message}\n`);

  /** Stops and removes everything the run started; a failure is one of the report's errors. */
  cleanup(): Promise<void> {
    return this.session?.close((name, err) => this.report.errors.push(`cleanup (${name}): ${err.message}`)) ?? Promise.resolve();
  }

  async run(): Promise<void> {
    if (!existsSync('/proc/self/status')) throw new Error('the bench reads memory and CPU from /proc: it runs on Linux only');
    const session = await BenchSession.open();
    this.session = session;
    const mesh = await this.startMesh(session);
    // A measurement, not a synchronisation: let start-up work (JIT, GC, pools) settle.
    await sleep(idleSettleMs);
    measureIdle(this.report, mesh, this.natsPid);
    this.progress(`idle mesh RSS ${this.report.idleMeshTotalMb} MB`);
    if (!(await this.runScenarios(session, mesh))) return;
    measurePeak(this.report, mesh, { baseline: this.baseline?.pid, nats: this.natsPid });
    this.report.postgresInserts = await measureInserts(mesh.env.DATABASE_URL, this.progress);
    this.report.setup.postgresServer = `${this.report.postgresInserts.server.version}, synchronous_commit=${this.report.postgresInserts.server.synchronousCommit}`;
  }

  private async startMesh(session: BenchSession): Promise<Mesh> {
    const { setup } = this.report;
    const nats = await startOwnNats(session);
    this.natsPid = nats.pid;
    setup.nats = nats.setup;
    if (process.env.DATABASE_URL) setup.postgres = 'DATABASE_URL';
    // startMesh creates postgres://postgres@127.0.0.1:5432/<database> (runtime/src/infra.ts).
    else if (await isPortOpen('127.0.0.1', 5432)) setup.postgres = `127.0.0.1:5432, database ${session.database} (dropped after)`;
    else setup.postgres = 'embedded (temp dir)';
    setup.logLevel = 'warn';
    setup.baseline = 'fastify child process (own event loop, like the gateway); autocannon runs in the bench process';

    this.progress('starting the mesh');
    const meshStarted = performance.now();
    const { mesh } = await startBenchMesh(session, { onLine: (component, line) => this.forward(component, line) });
    this.mesh = mesh;
    setup.meshStartSeconds = Math.round((performance.now() - meshStarted) / 100) / 10;
    this.progress(`mesh ready at ${mesh.gatewayUrl} in ${setup.meshStartSeconds} s`);
    return mesh;
  }

  /** Every scenario against the mesh and the baseline server; false when a process died (nothing after would measure the mesh). */
  private async runScenarios(session: BenchSession, mesh: Mesh): Promise<boolean> {
    this.progress('starting the baseline server');
    const baseline = await startBaselineServer({
      databaseUrl: mesh.env.DATABASE_URL,
      jwksUrl: `${mesh.gatewayUrl}/v1/.well-known/jwks.json`,
      poolMax: baselinePoolMax,
    });
    this.baseline = baseline;
    session.defer('baseline server', () => baseline.stop());
    const rig: ScenarioRig = {
      ctx: { mesh, baselineUrl: baseline.url },
      mesh,
      natsPid: this.natsPid,
      baselinePid: baseline.pid,
      progress: this.progress,
      deadProcess: () => this.deadProcess(),
    };
    for (const scenario of scenarios) {
      const result = await runScenario(scenario, rig, this.report);
      this.report.scenarios.push(result);
      const dead = this.deadProcess();
      if (dead) {
        // Report it once: the scenario's error says it already when it died during the load.
        if (!result.error) this.report.errors.push(dead);
        return false;
      }
    }
    return true;
  }

  private forward(component: Component, line: string) {
    if (!/"level":(5\d|6\d)/.test(line)) return;
    this.forwarded += 1;
    if (this.forwarded <= maxForwardedLines) process.stderr.write(`[${component}] ${line}\n`);
    else if (this.forwarded === maxForwardedLines + 1) process.stderr.write('[bench] (more error lines from the mesh are not shown)\n');
  }

  /** A component or the baseline that exited during the run (a crash), if any. */
  private deadProcess(): string | undefined {
    const [exited] = exitedComponents(this.mesh!);
    if (exited) return exited;
    if (this.baseline?.exited()) return `the baseline server exited during the bench:\n${this.baseline.output().slice(-2000)}`;
    return undefined;
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
