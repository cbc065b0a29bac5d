/**
 * Webhook retention benchmark (docs/webhooks.md#retention, docs/operations.md#benchmarks): how
 * long each retention batch holds its locks on a large backlog, while deliveries go on.
 *
 *   npm run bench:webhook-retention   (BENCH_RETENTION_DELIVERIES, default 1000000: old
 *                                      deliveries; BENCH_RETENTION_ATTEMPTS, default 2: attempts
 *                                      each; BENCH_RETENTION_WORKERS, default 4: delivery loops)
 *
 * 1. A webhooks schema of its own on the bench's Postgres (DATABASE_URL, else 127.0.0.1:5432,
 *    else an embedded server: runtime/src/infra.ts), migrated as the service migrates it.
 * 2. Seeds, by INSERT … SELECT FROM generate_series in chunks: BENCH_RETENTION_DELIVERIES
 *    finished deliveries 31 to 60 days old (each of its own event, with BENCH_RETENTION_ATTEMPTS
 *    attempts keeping a 200-byte response body) over 100 endpoints, and a tenth as many 8 to 29
 *    days old (kept; their bodies are dropped); then ANALYZE.
 * 3. Delivery loops (BENCH_RETENTION_WORKERS, in a worker thread of their own, so they never
 *    delay this thread's timing of the batches) run the service's own statements on 10 live
 *    endpoints: an event fanned out (store/deliveries.ts insertEvent, fanOut), a claim of due rows
 *    (claimDue, FOR UPDATE SKIP LOCKED) and their outcomes (insertAttempts, finishAttempts), each
 *    in its transaction: 10 s alone, then while retention runs (src/retention.ts Retention.run:
 *    the service's code with WEBHOOK_RETENTION 30 days), then 5 s alone again.
 * 4. Reports each step's batches (count, rows, the longest and p99 batch, rows/s) and the
 *    delivery loops' transactions (per second, p99 and max) before and during retention.
 *
 * A batch is one statement in its own transaction, so its duration (measured around the call,
 * round trip included) bounds how long it holds its locks. Targets, reported PASS/FAIL: the
 * longest batch < 100 ms and the p99 batch < 100 ms; every old delivery gone and every newer one
 * kept. Exits non-zero only when a check of the data failed or something crashed. Results:
 * printed, and written to bench/results/webhook-retention-<time>.json.
 */
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { createDb, type Knex, migrate } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import { dropDatabase, resolvePostgres } from '@switchboard/runtime/infra';
import { createLogger } from '@switchboard/runtime/log';
import { Retention, type RetentionBatch, type RetentionStep } from '@switchboard/webhooks/retention';
import { claimDue, fanOut, finishAttempts, insertAttempts, insertEvent } from '@switchboard/webhooks/store/deliveries';
import { insertEndpoint } from '@switchboard/webhooks/store/endpoints';
import { latencyOf, round } from './measure/latency.js';
import { inSession } from './measure/session.js';
import { benchHeader, check, fmt, machineFacts, runBench, type TargetCheck } from './report.js';

const oldDeliveries = Number(process.env.BENCH_RETENTION_DELIVERIES ?? 1_000_000);
const attemptsEach = Number(process.env.BENCH_RETENTION_ATTEMPTS ?? 2);
const workers = Number(process.env.BENCH_RETENTION_WORKERS ?? 4);
const keptDeliveries = Math.ceil(oldDeliveries / 10);
const day = 24 * 3_600_000;
const retentionMs = 30 * day;
const lockTargetMs = 100;
const seedChunk = 50_000;
const schema = 'webhooks';

/** One delivery loop's transactions: when each ended (ms since the epoch, comparable across threads) and how long it took. */
interface LoopSample {
  at: number;
  ms: number;
}

const clock = () => performance.timeOrigin + performance.now();

if (isMainThread) runBench(main);
else void deliveryThread(workerData as { url: string });

function main(): Promise<number> {
  return inSession('webhook-retention', async (session) => {
    const errors: string[] = [];
    const log = createLogger('bench-webhook-retention', 'warn');
    const postgres = await resolvePostgres({ dataDir: session.dataDir, database: session.database, log });
    session.defer('postgres', async () => {
      if (!process.env.DATABASE_URL) await dropDatabase(postgres.url).catch(() => undefined);
      await postgres.stop?.();
    });
    const db = createDb(postgres.url, schema, 4);
    session.defer('database pool', () => db.destroy());
    await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
    await migrate(db, schema, fileURLToPath(new URL('../../services/webhooks/dist/migrations/', import.meta.url)));

    // 2. The backlog.
    const archive: string[] = [];
    for (let i = 0; i < 100; i++) archive.push((await endpoint(db, `org_bench${i % 20}`)).id);
    const seedStart = performance.now();
    await seed(db, session.progress.bind(session), archive, 'old', oldDeliveries, 31, 60);
    await seed(db, session.progress.bind(session), archive, 'kept', keptDeliveries, 8, 29);
    await db.raw('ANALYZE');
    const seedSeconds = round((performance.now() - seedStart) / 1000, 1);
    const sizes = await db.raw<{ rows: Array<Record<string, string>> }>(
      `SELECT pg_size_pretty(pg_total_relation_size('deliveries')) AS deliveries, pg_size_pretty(pg_total_relation_size('attempts')) AS attempts,
              pg_size_pretty(pg_total_relation_size('events')) AS events`,
    );

    // 3. Deliveries going on: before, during and after retention.
    const thread = new Worker(new URL(import.meta.url), { workerData: { url: postgres.url } });
    const finished = new Promise<{ samples: LoopSample[]; errors: string[] }>((resolve, reject) => {
      thread.on('message', resolve);
      thread.on('error', reject);
    });
    session.defer('delivery thread', async () => void (await thread.terminate()));
    session.progress('deliveries alone for 10 s');
    const beforeStart = clock();
    await sleep(10_000);
    const retentionStart = clock();
    session.progress('retention while deliveries go on');
    const batches: RetentionBatch[] = [];
    const removed = await new Retention({ db, log, retentionMs, onBatch: (batch) => batches.push(batch) }).run();
    const retentionEnd = clock();
    session.progress('deliveries alone for 5 s');
    await sleep(5_000);
    const afterEnd = clock();
    thread.postMessage('stop');
    const { samples, errors: loopErrors } = await finished;
    errors.push(...loopErrors);

    // The data: every old delivery gone, every newer one kept, bodies dropped.
    const left = await db.raw<{ rows: Array<{ old: number; kept: number; bodies: number; events: number }> }>(
      `SELECT (SELECT count(*)::int FROM deliveries WHERE id LIKE 'dlv_old%') AS old, (SELECT count(*)::int FROM deliveries WHERE id LIKE 'dlv_kept%') AS kept,
              (SELECT count(*)::int FROM attempts WHERE id LIKE 'att_kept%' AND response_body IS NOT NULL) AS bodies,
              (SELECT count(*)::int FROM events WHERE id LIKE 'evt_old%') AS events`,
    );
    const data = left.rows[0];
    if (data.old !== 0) errors.push(`${data.old} old deliveries left`);
    if (data.events !== 0) errors.push(`${data.events} old events left`);
    if (data.kept !== keptDeliveries) errors.push(`${data.kept} of ${keptDeliveries} newer deliveries kept`);
    if (data.bodies !== 0) errors.push(`${data.bodies} response bodies older than 7 days left`);

    // 4. The report.
    const steps = (['deliveries', 'events', 'bodies'] as RetentionStep[]).map((step) => {
      const of = batches.filter((batch) => batch.step === step);
      const ms = of.map((batch) => batch.ms);
      const rows = of.reduce((sum, batch) => sum + batch.rows, 0);
      const seconds = ms.reduce((sum, value) => sum + value, 0) / 1000;
      return {
        step,
        batches: of.length,
        rows,
        ...latencyOf(ms),
        largestBatch: Math.max(0, ...of.map((batch) => batch.rows)),
        rowsPerSecond: Math.round(rows / seconds),
      };
    });
    const allMs = latencyOf(batches.map((batch) => batch.ms));
    const overTarget = batches.filter((batch) => batch.ms >= lockTargetMs);
    const window = (from: number, to: number) => {
      const inside = samples.filter((sample) => sample.at >= from && sample.at < to);
      return { transactions: inside.length, perSecond: Math.round(inside.length / ((to - from) / 1000)), ...latencyOf(inside.map((sample) => sample.ms)) };
    };
    const loopsBefore = window(beforeStart, retentionStart);
    const loopsDuring = window(retentionStart, retentionEnd);
    const loopsAfter = window(retentionEnd, afterEnd);
    const retentionSeconds = round((retentionEnd - retentionStart) / 1000, 1);
    const targets: TargetCheck[] = [
      check('longest retention batch (lock hold), ms', allMs.max, '<', lockTargetMs, 'ms'),
      check('p99 retention batch (lock hold), ms', allMs.p99, '<', lockTargetMs, 'ms'),
    ];

    const machine = machineFacts(session.loadAverageAtStart);
    const lines = [
      ...benchHeader('webhook-retention', session.at, machine, `Postgres and ${workers} delivery loops`),
      `  backlog: ${oldDeliveries} deliveries 31-60 days old and ${keptDeliveries} 8-29 days old, ${attemptsEach} attempts each (seeded in ${seedSeconds} s; deliveries ${sizes.rows[0].deliveries}, attempts ${sizes.rows[0].attempts}, events ${sizes.rows[0].events})`,
      `  retention (WEBHOOK_RETENTION 30d) took ${retentionSeconds} s: ${removed.deliveries} deliveries (with their attempts), ${removed.events} events, ${removed.bodies} bodies`,
      '',
      '  step        batches     rows   largest  p50 ms  p99 ms  max ms    rows/s',
      ...steps.map(
        (s) =>
          `  ${s.step.padEnd(10)} ${String(s.batches).padStart(8)} ${String(s.rows).padStart(8)} ${String(s.largestBatch).padStart(9)} ${fmt(s.p50, 1).padStart(7)} ${fmt(s.p99, 1).padStart(7)} ${fmt(s.max, 1).padStart(7)} ${String(s.rowsPerSecond).padStart(9)}`,
      ),
      `  batches at or over ${lockTargetMs} ms: ${overTarget.length} of ${batches.length} (${overTarget.map((batch) => `${batch.step} ${fmt(batch.ms, 0)} ms`).join(', ') || 'none'})`,
      '',
      '  delivery loops (fan-out, claim, outcome transactions)   tx/s  p99 ms  max ms',
      ...(
        [
          ['before retention', loopsBefore],
          ['during retention', loopsDuring],
          ['after retention', loopsAfter],
        ] as const
      ).map(([name, w]) => `  ${name.padEnd(54)} ${String(w.perSecond).padStart(5)} ${fmt(w.p99, 1).padStart(7)} ${fmt(w.max, 1).padStart(7)}`),
    ];
    return session.finish({
      lines,
      targets,
      errors,
      report: {
        at: session.at,
        machine,
        setup: { oldDeliveries, keptDeliveries, attemptsEach, workers, retentionMs, seedSeconds, sizes: sizes.rows[0] },
        retention: { seconds: retentionSeconds, removed, steps, batchMs: allMs, overTarget },
        deliveryLoops: { before: loopsBefore, during: loopsDuring, after: loopsAfter },
        targets,
        errors,
      } as { totalSeconds?: number },
    });
  });
}

/** The delivery loops' thread: runs them until told to stop, then sends back their samples. */
async function deliveryThread({ url }: { url: string }) {
  const db = createDb(url, schema, workers + 1);
  const live: Array<{ id: string; workspace_id: string }> = [];
  for (let i = 0; i < 10; i++) live.push(await endpoint(db, `org_live${i}`));
  const samples: LoopSample[] = [];
  const errors: string[] = [];
  let stop = false;
  parentPort?.once('message', () => {
    stop = true;
  });
  await Promise.all(
    Array.from({ length: workers }, (_, worker) =>
      deliveryLoop(db, live, worker, samples, () => stop).catch((err: Error) => {
        errors.push(`delivery loop ${worker}: ${err.message}`);
      }),
    ),
  );
  await db.destroy();
  parentPort?.postMessage({ samples, errors });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function endpoint(db: Knex, workspaceId: string) {
  return insertEndpoint(db, {
    id: newId('wh'),
    workspaceId,
    url: 'https://receiver.example/hook',
    events: [],
    description: null,
    secretEncrypted: 'sealed',
    createdBy: 'usr_bench',
  });
}

/** `count` finished deliveries (ids `dlv_<tag>N`) created `fromDays` to `toDays` ago, each of its own event, with their attempts. */
async function seed(db: Knex, progress: (message: string) => void, endpoints: string[], tag: string, count: number, fromDays: number, toDays: number) {
  for (let from = 1; from <= count; from += seedChunk) {
    const to = Math.min(count, from + seedChunk - 1);
    progress(`seeding ${tag} deliveries ${from}..${to} of ${count}`);
    // Spread over the days evenly: the oldest first, as they would have been written.
    const age = `(interval '1 day' * ${fromDays} + (interval '1 day' * ${toDays - fromDays}) * (1 - g::float8 / ${count}))`;
    await db.transaction(async (trx) => {
      await trx.raw(
        `INSERT INTO events (id, type, workspace_id, occurred_at, body, created_at)
         SELECT 'evt_${tag}' || g, 'agent.completed', 'org_bench', now() - ${age}, '{"type":"agent.completed","data":{"run":"bench"}}', now() - ${age}
         FROM generate_series(?::int, ?::int) g`,
        [from, to],
      );
      await trx.raw(
        `INSERT INTO deliveries (id, endpoint_id, event_id, event_type, status, attempt_count, scheduled_attempts, next_trigger, created_at, succeeded_at)
         SELECT 'dlv_${tag}' || g, (?::text[])[1 + g % ?], 'evt_${tag}' || g, 'agent.completed', 'succeeded', ?, ?, 'retry', now() - ${age}, now() - ${age}
         FROM generate_series(?::int, ?::int) g`,
        [endpoints, endpoints.length, attemptsEach, attemptsEach, from, to],
      );
      await trx.raw(
        `INSERT INTO attempts (id, delivery_id, url, status, response_status_code, error_class, duration_ms, response_body, trigger, created_at)
         SELECT 'att_${tag}' || g || '_' || n, 'dlv_${tag}' || g, 'https://receiver.example/hook', CASE WHEN n = ? THEN 'success' ELSE 'failed' END,
                CASE WHEN n = ? THEN 200 ELSE 503 END, CASE WHEN n = ? THEN NULL ELSE 'http' END, 40, repeat('x', 200), 'event', now() - ${age}
         FROM generate_series(?::int, ?::int) g, generate_series(1, ?::int) n`,
        [attemptsEach, attemptsEach, attemptsEach, from, to, attemptsEach],
      );
    });
  }
}

/**
 * Deliveries as the service makes them, until `stopped`: an event fanned out to a live endpoint,
 * due rows claimed, their outcomes committed; each transaction's end and duration in `samples`.
 */
async function deliveryLoop(db: Knex, live: Array<{ id: string; workspace_id: string }>, worker: number, samples: LoopSample[], stopped: () => boolean) {
  let turn = 0;
  const timed = async <T>(work: () => Promise<T>): Promise<T> => {
    const started = clock();
    const result = await work();
    const at = clock();
    samples.push({ at, ms: at - started });
    return result;
  };
  while (!stopped()) {
    const target = live[(worker + turn++) % live.length];
    const id = newId('evt');
    await timed(() =>
      db.transaction(async (trx) => {
        await insertEvent(trx, { id, type: 'agent.completed', workspaceId: target.workspace_id, occurredAt: new Date().toISOString(), body: '{}' });
        await fanOut(trx, [{ id, type: 'agent.completed', workspaceId: target.workspace_id }]);
      }),
    );
    const claims = await timed(() =>
      claimDue(db, { limit: 20, perEndpoint: 8, perWorkspace: 32, busy: new Map(), busyWorkspaces: new Map(), excluded: [], leaseMs: 60_000 }),
    );
    if (claims.length === 0) continue;
    await timed(() =>
      db.transaction(async (trx) => {
        await insertAttempts(
          trx,
          claims.map((claim) => ({
            delivery_id: claim.id,
            url: claim.url,
            status: 'success' as const,
            response_status_code: 200,
            error_class: null,
            duration_ms: 5,
            response_body: 'ok',
            trigger: claim.next_trigger,
          })),
        );
        await finishAttempts(
          trx,
          claims.map((claim) => ({ id: claim.id, status: 'succeeded' as const, scheduledAttempts: 1, nextAttemptAt: null, succeeded: true })),
        );
      }),
    );
  }
}
