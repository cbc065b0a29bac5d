import type { Mesh } from '@switchboard/runtime/dev/mesh';
import type pg from 'pg';
import { round } from '../measure/latency.js';
import { type CpuUse, cpuMeter } from '../measure/proc.js';
import type { BenchSession } from '../measure/session.js';
import { durationSeconds, warmupSeconds } from '../scenarios.js';
import { type Account, waitUntilVisible } from './accounts.js';
import { type Drive, drive, type Feed } from './feeds.js';
import { concurrency, visibility, workspaces } from './settings.js';
import { pipelineBacklog, waitUntilSettled } from './tables.js';

/** The warm-up of a feed: BENCH_WARMUP_SECONDS of it, then until the keys service shows it; the usages it sent. */
export async function warmUp(session: BenchSession, mesh: Mesh, feed: Feed, accounts: Account[], runId: string): Promise<number> {
  session.progress(`warm-up: ${warmupSeconds} s of ${feed.name}, then until the keys service shows it`);
  const warm = await drive(feed, accounts, runId, 'warm', Math.max(warmupSeconds, 0.5));
  if (warm.errors + warm.failed > 0)
    throw new Error(`warm-up of ${feed.name}: ${warm.failed} wrong answers, ${warm.errors} errors (first: ${warm.firstProblem})`);
  await waitUntilVisible(mesh.gatewayUrl, accounts, visibility);
  return warm.ok;
}

export interface EndToEnd {
  feed: Feed;
  run: Drive;
  /** Usages sent before this run (every feed's warm-ups and runs), for the backlog's count. */
  usagesBefore: number;
  callsCpu: CpuUse;
  endToEndCpu: CpuUse;
  backlog: Awaited<ReturnType<typeof pipelineBacklog>>;
  callSeconds: number;
  /** performance.now() when billing had every usage's row; undefined when it never had (then in `errors`). */
  settledAt?: number;
  /** performance.now() when the last key's spend was seen complete; undefined when it never was (then in `errors`). */
  visibleAt?: number;
  errors: string[];
}

/**
 * The measured run of a feed: BENCH_DURATION_SECONDS of it, where the usages are at the last
 * answer, then until billing has every usage row and until every key's spend shows them; the
 * CPU of the `watch`ed processes over the answers and over the whole.
 */
export async function measureEndToEnd(
  session: BenchSession,
  context: { mesh: Mesh; db: pg.Client; feed: Feed; accounts: Account[]; runId: string; watch: Record<string, Array<number | undefined>> },
): Promise<EndToEnd> {
  const { mesh, db, feed, accounts } = context;
  const usagesBefore = accounts.reduce((sum, account) => sum + account.calls, 0);
  session.progress(`${feed.name}, ${concurrency} in flight, ${durationSeconds} s, ${workspaces} workspaces in turn`);
  const meter = cpuMeter(context.watch);
  const run = await drive(feed, accounts, context.runId, 'run', durationSeconds);
  const callsCpu = meter();
  const backlog = await pipelineBacklog(db);
  const callSeconds = (run.lastAnswerAt - run.firstCallAt) / 1000;
  const usages = usagesBefore + run.ok;
  session.progress(
    `${run.ok} usages answered in ${round(callSeconds)} s; at the last answer billing had ${backlog.usageRows} usage rows of ${usages}, ${backlog.unpublishedOutboxRows} outbox rows were unpublished and the keys service had applied ${backlog.keysAppliedUsageEvents} usage events; waiting until billing has them all and every key's spend shows them`,
  );
  const errors: string[] = [];
  let settledAt: number | undefined;
  let visibleAt: number | undefined;
  try {
    settledAt = await waitUntilSettled(db, usages, visibility);
    visibleAt = await waitUntilVisible(mesh.gatewayUrl, accounts, visibility);
  } catch (err) {
    errors.push(`${feed.name} end to end: ${(err as Error).message}`);
  }
  if (run.errors + run.failed > 0) errors.push(`${feed.name}: ${run.failed} wrong answers, ${run.errors} errors (first: ${run.firstProblem})`);
  const endToEndCpu = meter();
  return { feed, run, usagesBefore, callsCpu, endToEndCpu, backlog, callSeconds, settledAt, visibleAt, errors };
}
