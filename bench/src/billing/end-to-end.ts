import type { Mesh } from '@switchboard/runtime/dev/mesh';
import type pg from 'pg';
import { round } from '../measure/latency.js';
import { postgresBackends } from '../measure/postgres.js';
import { type CpuUse, cpuMeter } from '../measure/proc.js';
import type { BenchSession } from '../measure/session.js';
import { durationSeconds, warmupSeconds } from '../scenarios.js';
import { type Account, waitUntilVisible } from './accounts.js';
import { type Drive, drive, type RecordUsage } from './record-usage.js';
import { concurrency, visibleTimeoutMs, workspaces } from './settings.js';
import { pipelineBacklog } from './tables.js';

/** The warm-up: RecordUsage for BENCH_WARMUP_SECONDS, then until the keys service shows it; the usages it recorded. */
export async function warmUp(session: BenchSession, mesh: Mesh, record: RecordUsage, accounts: Account[], runId: string): Promise<number> {
  session.progress(`warm-up: ${warmupSeconds} s of RecordUsage, then until the keys service shows it`);
  const warm = await drive(record, accounts, runId, 'warm', Math.max(warmupSeconds, 0.5));
  if (warm.errors + warm.failed > 0) throw new Error(`warm-up: ${warm.failed} wrong answers, ${warm.errors} errors (first: ${warm.firstProblem})`);
  await waitUntilVisible(mesh.gatewayUrl, accounts, visibleTimeoutMs);
  return warm.ok;
}

export interface EndToEnd {
  run: Drive;
  /** The processes whose CPU is measured, by the name they have in the report. */
  watch: Record<string, Array<number | undefined>>;
  callsCpu: CpuUse;
  endToEndCpu: CpuUse;
  backlog: Awaited<ReturnType<typeof pipelineBacklog>>;
  callSeconds: number;
  /** performance.now() when the last key's spend was seen complete; undefined when it never was (then in `errors`). */
  visibleAt?: number;
  errors: string[];
}

/**
 * The measured run: RecordUsage for BENCH_DURATION_SECONDS, where the events are at the last
 * answer, then until every key's spend shows the usages; the CPU of both spans.
 */
export async function measureEndToEnd(
  session: BenchSession,
  context: { mesh: Mesh; db: pg.Client; natsPid?: number; record: RecordUsage; accounts: Account[]; runId: string; warmUsages: number },
): Promise<EndToEnd> {
  const { mesh, db, record, accounts } = context;
  const watch = {
    billing: [mesh.pid('billing')],
    keys: [mesh.pid('keys')],
    gateway: [mesh.pid('gateway')],
    postgres: await postgresBackends(mesh.env.DATABASE_URL),
    'nats-server': [context.natsPid],
    'bench (load generator)': [process.pid],
  };
  session.progress(`RecordUsage, ${concurrency} in flight over one h2c connection, ${durationSeconds} s, ${workspaces} workspaces in turn`);
  const meter = cpuMeter(watch);
  const run = await drive(record, accounts, context.runId, 'run', durationSeconds);
  const callsCpu = meter();
  const backlog = await pipelineBacklog(db);
  const callSeconds = (run.lastAnswerAt - run.firstCallAt) / 1000;
  session.progress(
    `${run.ok} usages recorded in ${round(callSeconds)} s; at the last answer ${backlog.unpublishedOutboxRows} outbox rows were unpublished and the keys service had applied ${backlog.keysAppliedUsageEvents} of ${context.warmUsages + run.ok}; waiting until every key's spend shows them`,
  );
  const errors: string[] = [];
  let visibleAt: number | undefined;
  try {
    visibleAt = await waitUntilVisible(mesh.gatewayUrl, accounts, visibleTimeoutMs);
  } catch (err) {
    errors.push(`end to end: ${(err as Error).message}`);
  }
  const endToEndCpu = meter();
  return { run, watch, callsCpu, endToEndCpu, backlog, callSeconds, visibleAt, errors };
}
