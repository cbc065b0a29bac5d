/**
 * Billing benchmark: `switchboard.billing.v1.UsageService/RecordUsage` end to end (the debit, its
 * outbox row, the relay to JetStream and the keys service's month-to-date spend of the key
 * updated and visible through REST) against the raw Postgres insert rate measured in the same run
 * (baselines.ts runInsertLoop, the settings of `npm run bench`).
 *
 *   npm run bench:billing   (BENCH_DURATION_SECONDS, default 10: seconds of calls; BENCH_WARMUP_SECONDS,
 *                            default 2; BENCH_BILLING_WORKSPACES, default 16; BENCH_NODE_FLAGS, e.g.
 *                            "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the mesh)
 *
 * 1. Boots the mesh (its own database on the Postgres startMesh finds, dropped at the end when it
 *    is the local server; its own nats-server in a temp dir unless NATS_URL is set, so no other
 *    mesh's consumers take its events), registers `workspaces` users through the gateway and
 *    creates a key in each one's personal workspace (POST /v1/keys). Several workspaces, because
 *    every debit of a workspace updates its one balance row: with one workspace the 64 calls
 *    would queue on that row lock.
 * 2. Warm-up: RecordUsage for BENCH_WARMUP_SECONDS, then waits until the keys service shows it.
 * 3. 64 calls in flight from this process over one h2c connection (Connect binary, a mesh token
 *    of caller "data-plane"), each a distinct generation id of `service/fast` (1000 input, 500
 *    output tokens: 0.0003 USD), the workspaces in turn, for BENCH_DURATION_SECONDS. A usage is
 *    done end to end when its call answered and the keys service counts it: after the last
 *    answer, GET /v1/keys/{id} of every key is polled until its month_to_date_spend_usd is the sum
 *    of the costs answered for it (warm-up included). End-to-end rate = measured usages ÷ (time
 *    from the first measured call to when the last key's spend was seen complete).
 * 4. The billing tables are checked against the answers (rows and sum per key, no unpublished
 *    outbox row left), then the raw insert loop runs on the same database, the mesh idle.
 *
 * Target, reported PASS/FAIL (never a crash): end-to-end usages/s ÷ raw inserts/s ≥ 0.20. Exits
 * non-zero only when a call failed, a check failed or something crashed. Results: printed, and
 * written to bench/results/billing-<time>.json.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConnectError, createClient, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { components, type Mesh, startMesh } from '@switchboard/runtime/dev/mesh';
import { dropDatabase, startNatsServer } from '@switchboard/runtime/infra';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { Money } from '@switchboard/runtime/money';
import pg from 'pg';
import { type InsertLoopResult, runInsertLoop } from './measure/inserts.js';
import { percentile } from './measure/latency.js';
import { type CpuUse, cpuMeter, readMemory } from './measure/proc.js';
import { check, finishBench, fmt, machineFacts, runBench, type TargetCheck, table } from './report.js';
import { createKey, durationSeconds, registerUser, warmupSeconds } from './scenarios.js';

const resultsDir = fileURLToPath(new URL('../results/', import.meta.url));
const concurrency = 64;
const workspaces = (() => {
  const raw = process.env.BENCH_BILLING_WORKSPACES;
  return raw && /^[1-9]\d*$/.test(raw) ? Number(raw) : 16;
})();
const minRatio = 0.2;
/** The raw insert loop of `npm run bench` (bench/src/run.ts), so both benches compare with the same reference. */
const insertLoop = { concurrency: 16, maxInserts: 200_000, maxSeconds: 5, warmupInserts: 1_000 };
/** A hard cap on the calls of one run, whatever its duration: loops are bounded in count too. */
const maxCalls = 2_000_000;
const callTimeoutMs = 10_000;
/** How long the keys service may take to show the usages after the last answer before the run fails. */
const visibleTimeoutMs = 60_000;
/** Between two reads of a key's spend that is not complete yet (one request in flight: the polling costs the mesh little). */
const pollIntervalMs = 25;
/** What each call records: service/fast, 1000 × 0.10/1M + 500 × 0.40/1M (pricing.json). */
const usageShape = { model: 'service/fast', inputTokens: 1000n, outputTokens: 500n };

const progress = (message: string) => process.stderr.write(`[bench:billing] ${message}\n`);
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

interface Account {
  token: string;
  workspaceId: string;
  keyId: string;
  /** Sum of the costs RecordUsage answered for the key so far. */
  recorded: Money;
  calls: number;
}

/** GET /v1/keys/{id}: the key's month-to-date spend as the keys service has it. */
async function monthToDate(gatewayUrl: string, account: Account): Promise<string> {
  const response = await fetch(`${gatewayUrl}/v1/keys/${account.keyId}`, {
    headers: { authorization: `Bearer ${account.token}` },
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET /v1/keys/${account.keyId} answered ${response.status}: ${text.slice(0, 500)}`);
  const spend = (JSON.parse(text) as { month_to_date_spend_usd?: string }).month_to_date_spend_usd;
  if (typeof spend !== 'string') throw new Error(`GET /v1/keys/${account.keyId}: no month_to_date_spend_usd in ${text.slice(0, 500)}`);
  return spend;
}

/**
 * Waits until the keys service's spend of every key equals what was recorded for it, one key at a
 * time with one request in flight (the usages went to the keys in turn and the keys service
 * applies them in order, so while the first key completes the others do too): the time
 * (performance.now()) the last key was seen complete, or an error after `timeoutMs`. A spend
 * above the recorded sum is an error at once (something counted twice).
 */
async function waitUntilVisible(gatewayUrl: string, accounts: Account[], timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  let seenAt = performance.now();
  for (const [i, account] of accounts.entries()) {
    for (;;) {
      const spend = new Money(await monthToDate(gatewayUrl, account));
      seenAt = performance.now();
      if (spend.eq(account.recorded)) break;
      if (spend.gt(account.recorded))
        throw new Error(`key ${account.keyId}: the keys service shows ${spend.toFixed()} USD, more than the ${account.recorded.toFixed()} recorded`);
      if (seenAt > deadline) {
        throw new Error(
          `after ${timeoutMs} ms the keys service shows ${spend.toFixed()} USD of the ${account.recorded.toFixed()} recorded for key ${account.keyId} (${accounts.length - i} keys not complete yet)`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, pollIntervalMs));
    }
  }
  return seenAt;
}

interface Drive {
  ok: number;
  failed: number;
  errors: number;
  /** performance.now() of the first call and of the last answer. */
  firstCallAt: number;
  lastAnswerAt: number;
  latencies: number[];
  firstProblem?: string;
}

/** `concurrency` loops calling RecordUsage for `seconds`, the accounts in turn; latencies of fresh charges only. */
async function drive(
  record: (account: Account, generationId: string) => Promise<{ costUsd: string; duplicate: boolean }>,
  accounts: Account[],
  runId: string,
  phase: string,
  seconds: number,
): Promise<Drive> {
  const latencies: number[] = [];
  let ok = 0;
  let failed = 0;
  let errors = 0;
  let issued = 0;
  let firstProblem: string | undefined;
  let lastAnswerAt = 0;
  const firstCallAt = performance.now();
  const deadline = firstCallAt + seconds * 1000;
  const worker = async () => {
    while (issued < maxCalls && performance.now() < deadline) {
      const n = issued++;
      const account = accounts[n % accounts.length];
      const started = performance.now();
      try {
        const answer = await record(account, `gen_bench_${runId}_${phase}_${n}`);
        lastAnswerAt = performance.now();
        if (answer.duplicate) {
          failed += 1;
          firstProblem ??= `a fresh generation id answered duplicate: true`;
        } else {
          latencies.push(lastAnswerAt - started);
          account.recorded = account.recorded.plus(answer.costUsd);
          account.calls += 1;
          ok += 1;
        }
      } catch (err) {
        lastAnswerAt = performance.now();
        errors += 1;
        firstProblem ??= ConnectError.from(err).message;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { ok, failed, errors, firstCallAt, lastAnswerAt, latencies, firstProblem };
}

/** The Postgres backends serving the bench database (their CPU is the database's share), when Postgres runs on this host. */
async function postgresBackends(databaseUrl: string): Promise<number[]> {
  if (!['127.0.0.1', 'localhost'].includes(new URL(databaseUrl).hostname)) return [];
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    const { rows } = await client.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
    );
    return rows.map((row) => row.pid);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Where the events are when the calls end: outbox rows not yet published, usages the keys service applied. */
async function pipelineBacklog(db: pg.Client): Promise<{ unpublishedOutboxRows: number; keysAppliedUsageEvents: number }> {
  const { rows } = await db.query<{ unpublished: string; applied: string }>(
    `SELECT (SELECT count(*) FROM billing.outbox WHERE published_at IS NULL) AS unpublished,
            (SELECT count(*) FROM keys.processed_events WHERE consumer = 'keys-billing-usage-recorded') AS applied`,
  );
  return { unpublishedOutboxRows: Number(rows[0].unpublished), keysAppliedUsageEvents: Number(rows[0].applied) };
}

/** Billing's own tables against the answers: one row per answered usage, their sum per key, every outbox row published. */
async function checkBillingTables(db: pg.Client, accounts: Account[]): Promise<string[]> {
  const problems: string[] = [];
  const { rows } = await db.query<{ key_id: string; rows: string; cost: string }>(
    'SELECT key_id, count(*) AS rows, sum(cost_usd)::text AS cost FROM billing.usage_records WHERE key_id = ANY($1) GROUP BY key_id',
    [accounts.map((a) => a.keyId)],
  );
  const byKey = new Map(rows.map((row) => [row.key_id, row]));
  for (const account of accounts) {
    const row = byKey.get(account.keyId);
    if (Number(row?.rows ?? 0) !== account.calls || !new Money(row?.cost ?? '0').eq(account.recorded)) {
      problems.push(
        `key ${account.keyId}: ${row?.rows ?? 0} usage rows summing ${row?.cost ?? '0'}, but ${account.calls} answers summing ${account.recorded.toFixed()}`,
      );
    }
  }
  const { rows: outbox } = await db.query<{ unpublished: string; usage_events: string; usage_rows: string }>(
    `SELECT (SELECT count(*) FROM billing.outbox WHERE published_at IS NULL) AS unpublished,
            (SELECT count(*) FROM billing.outbox WHERE payload->>'type' = 'billing.usage.recorded') AS usage_events,
            (SELECT count(*) FROM billing.usage_records) AS usage_rows`,
  );
  if (outbox[0].unpublished !== '0') problems.push(`${outbox[0].unpublished} outbox rows are still unpublished after the keys service showed every usage`);
  if (outbox[0].usage_events !== outbox[0].usage_rows)
    problems.push(`${outbox[0].usage_rows} usage rows but ${outbox[0].usage_events} billing.usage.recorded outbox rows`);
  return problems;
}

const cpuCell = (cpu: CpuUse, name: string) => fmt(cpu.processes[name]);
/** CPU milliseconds a process spent per usage over a phase. */
const msPerUsage = (cpu: CpuUse, name: string, seconds: number, usages: number) =>
  cpu.processes[name] === undefined || usages === 0 ? undefined : round(((cpu.processes[name] / 100) * seconds * 1000) / usages, 3);

async function main(): Promise<number> {
  const started = performance.now();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-billing-'));
  const database = `switchboard_bench_billing_${process.pid}_${Date.now().toString(36)}`;
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const at = new Date().toISOString();
  const loadAverageAtStart = os.loadavg().map((l) => round(l));
  const cleanups: Array<() => Promise<void>> = [];
  try {
    let natsPid: number | undefined;
    let natsSetup = 'NATS_URL';
    if (!process.env.NATS_URL) {
      try {
        const nats = await startNatsServer(path.join(dataDir, 'nats'));
        natsPid = nats.process.pid;
        cleanups.push(() => nats.stop!());
        process.env.NATS_URL = nats.url;
        natsSetup = 'own nats-server';
      } catch (err) {
        progress(`could not start a nats-server of its own (${(err as Error).message}); using the mesh's discovery with a stream of this run`);
        natsSetup = 'discovered by startMesh, stream of this run';
      }
    }
    // Without a server of its own, a stream and subjects of its own: other meshes' consumers never see these events.
    const eventsEnv: Record<string, string> = natsPid ? {} : { EVENTS_SUBJECT_PREFIX: `benchbilling.${runId}`, EVENTS_STREAM: `BENCH_BILLING_${runId}` };
    if (!process.env.DATABASE_URL) cleanups.push(() => dropDatabase(`postgres://postgres@127.0.0.1:5432/${database}`).catch(() => undefined));

    progress('starting the mesh');
    const nodeFlags = process.env.BENCH_NODE_FLAGS?.split(' ').filter(Boolean);
    const mesh: Mesh = await startMesh({
      dataDir,
      randomPorts: true,
      database,
      nodeFlags,
      // One registration per workspace from this address: above identity's hourly default of 20 when many are asked for.
      env: { LOG_LEVEL: 'warn', REGISTRATIONS_PER_IP_PER_HOUR: '100000', ...eventsEnv },
    });
    cleanups.push(() => mesh.stop());
    const meshStartSeconds = round((performance.now() - started) / 1000, 1);

    progress(`creating ${workspaces} workspaces with a key each through the gateway`);
    const accounts: Account[] = [];
    for (let i = 0; i < workspaces; i++) {
      const user = await registerUser(mesh.gatewayUrl, `billing${i}`);
      const { keyId } = await createKey(mesh.gatewayUrl, user.accessToken, 'bench billing');
      accounts.push({ token: user.accessToken, workspaceId: user.workspaceId, keyId, recorded: new Money(0), calls: 0 });
    }

    // One token for the whole run: minted tokens live 5 minutes (runtime/src/mesh-token.ts).
    const meshToken = await new MeshTokens(mesh.env.SWITCHBOARD_MESH_SECRET).mint('billing', { caller: 'data-plane' });
    const addToken: Interceptor = (next) => (req) => {
      req.header.set('authorization', `Bearer ${meshToken}`);
      return next(req);
    };
    const sessionManager = new Http2SessionManager(mesh.urls.billing);
    cleanups.push(async () => sessionManager.abort());
    const usage = createClient(
      UsageService,
      createConnectTransport({ baseUrl: mesh.urls.billing, httpVersion: '2', useBinaryFormat: true, sessionManager, interceptors: [addToken] }),
    );
    const record = (account: Account, generationId: string) =>
      usage.recordUsage({ generationId, keyId: account.keyId, workspaceId: account.workspaceId, ...usageShape }, { timeoutMs: callTimeoutMs });

    const db = new pg.Client({ connectionString: mesh.env.DATABASE_URL, connectionTimeoutMillis: 3000 });
    await db.connect();
    cleanups.push(() => db.end());

    progress(`warm-up: ${warmupSeconds} s of RecordUsage, then until the keys service shows it`);
    const warm = await drive(record, accounts, runId, 'warm', Math.max(warmupSeconds, 0.5));
    if (warm.errors + warm.failed > 0) throw new Error(`warm-up: ${warm.failed} wrong answers, ${warm.errors} errors (first: ${warm.firstProblem})`);
    await waitUntilVisible(mesh.gatewayUrl, accounts, visibleTimeoutMs);
    const warmUsages = warm.ok;

    const watch = {
      billing: [mesh.pid('billing')],
      keys: [mesh.pid('keys')],
      gateway: [mesh.pid('gateway')],
      postgres: await postgresBackends(mesh.env.DATABASE_URL),
      'nats-server': [natsPid],
      'bench (load generator)': [process.pid],
    };
    progress(`RecordUsage, ${concurrency} in flight over one h2c connection, ${durationSeconds} s, ${workspaces} workspaces in turn`);
    const meter = cpuMeter(watch);
    const run = await drive(record, accounts, runId, 'run', durationSeconds);
    const callsCpu = meter();
    const backlog = await pipelineBacklog(db);
    const callSeconds = (run.lastAnswerAt - run.firstCallAt) / 1000;
    progress(
      `${run.ok} usages recorded in ${round(callSeconds)} s; at the last answer ${backlog.unpublishedOutboxRows} outbox rows were unpublished and the keys service had applied ${backlog.keysAppliedUsageEvents} of ${warmUsages + run.ok}; waiting until every key's spend shows them`,
    );
    const errors: string[] = [];
    let visibleAt: number | undefined;
    try {
      visibleAt = await waitUntilVisible(mesh.gatewayUrl, accounts, visibleTimeoutMs);
    } catch (err) {
      errors.push(`end to end: ${(err as Error).message}`);
    }
    const endToEndCpu = meter();
    if (run.errors + run.failed > 0) errors.push(`RecordUsage: ${run.failed} wrong answers, ${run.errors} errors (first: ${run.firstProblem})`);
    if (visibleAt !== undefined) errors.push(...(await checkBillingTables(db, accounts)));
    for (const component of components) {
      if (!readMemory(mesh.pid(component))) errors.push(`${component} exited during the bench:\n${mesh.output(component).split('\n').slice(-20).join('\n')}`);
    }

    progress(`raw Postgres insert loop (${insertLoop.maxInserts} rows or ${insertLoop.maxSeconds} s, concurrency ${insertLoop.concurrency})`);
    const inserts: InsertLoopResult = await runInsertLoop({ databaseUrl: mesh.env.DATABASE_URL, ...insertLoop });

    const endToEndSeconds = visibleAt === undefined ? undefined : (visibleAt - run.firstCallAt) / 1000;
    const callsPerSecond = callSeconds > 0 ? Math.round(run.ok / callSeconds) : 0;
    const endToEndPerSecond = endToEndSeconds ? Math.round(run.ok / endToEndSeconds) : 0;
    const ratio = inserts.insertsPerSecond > 0 ? round(endToEndPerSecond / inserts.insertsPerSecond, 3) : 0;
    const callsRatio = inserts.insertsPerSecond > 0 ? round(callsPerSecond / inserts.insertsPerSecond, 3) : 0;
    const sorted = Float64Array.from(run.latencies).sort();
    const latencyMs = { p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: percentile(sorted, 100) };
    const targets: TargetCheck[] = [check('end-to-end usages/s ÷ raw Postgres inserts/s', ratio, '>=', minRatio, 'ratio')];
    const perUsage = (cpu: CpuUse, seconds: number) => Object.fromEntries(Object.keys(watch).map((name) => [name, msPerUsage(cpu, name, seconds, run.ok)]));

    const report = {
      at,
      machine: machineFacts(loadAverageAtStart),
      settings: {
        concurrency,
        workspaces,
        durationSeconds,
        warmupSeconds,
        callTimeoutMs,
        usage: { ...usageShape, inputTokens: 1000, outputTokens: 500 },
        nats: natsSetup,
        insertLoop,
      },
      meshStartSeconds,
      warmUp: { usages: warmUsages },
      recordUsage: {
        usages: run.ok,
        failed: run.failed,
        errors: run.errors,
        callSeconds: round(callSeconds),
        callsPerSecond,
        latencyMs,
        cpu: callsCpu,
        cpuMsPerUsage: perUsage(callsCpu, callSeconds),
      },
      backlogAtLastAnswer: backlog,
      endToEnd: {
        seconds: endToEndSeconds === undefined ? undefined : round(endToEndSeconds),
        usagesPerSecond: endToEndPerSecond,
        /** From the last answer to the last key's spend seen complete. */
        lagAfterLastAnswerMs: visibleAt === undefined ? undefined : Math.round(visibleAt - run.lastAnswerAt),
        cpu: endToEndCpu,
        cpuMsPerUsage: endToEndSeconds === undefined ? undefined : perUsage(endToEndCpu, endToEndSeconds),
      },
      postgresInserts: inserts,
      ratio,
      callsRatio,
      targets,
      errors,
      totalSeconds: 0,
    };

    const out: string[] = [];
    out.push(`Switchboard bench:billing  ${at}`);
    out.push(
      `  node ${process.version}, ${report.machine.cpus} CPU (${report.machine.model}), load avg at start ${loadAverageAtStart.join(' ')}, at end ${report.machine.loadAverageAtEnd.join(' ')}; the load generator is this process, on the same cores`,
    );
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
            `raw Postgres INSERT (autocommit, ${inserts.concurrency} at a time)`,
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
    out.push(`  Postgres ${inserts.server.version}, synchronous_commit=${inserts.server.synchronousCommit}`);
    out.push('');
    out.push('CPU (% of one core; postgres = the client backends of the bench database; host = % of all cores, every process on it) and CPU ms per usage');
    const names = Object.keys(watch);
    const cpuRow = (phase: string, cpu: CpuUse, ms: Record<string, number | undefined> | undefined) => [
      phase,
      ...names.map((name) => `${cpuCell(cpu, name)} / ${fmt(ms?.[name], 2)}`),
      fmt(cpu.hostBusyPercent),
    ];
    out.push(
      table(
        ['phase', ...names, 'host%'],
        [cpuRow('calls', callsCpu, report.recordUsage.cpuMsPerUsage), cpuRow('first call → last spend visible', endToEndCpu, report.endToEnd.cpuMsPerUsage)],
      ),
    );
    return finishBench({ name: 'billing', lines: out, targets, errors, startedAt: started, at, resultsDir, report });
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch((err: unknown) => progress(`cleanup: ${(err as Error).message}`));
    await rm(dataDir, { recursive: true, force: true });
  }
}

runBench(main);
