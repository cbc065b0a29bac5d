/**
 * Usage analytics benchmark (docs/api/billing.md#usage-analytics, docs/operations.md#benchmarks):
 * GET /v1/usage on a workspace of BENCH_USAGE_ROWS (default 1,000,000) usage rows, and what
 * keeping its aggregates costs the settlement of each usage record.
 *
 *   npm run bench:usage   (BENCH_USAGE_ROWS, default 1000000; BENCH_USAGE_RUNS, default 20:
 *                          timed queries per shape; BENCH_USAGE_BATCHES, default 60: settled
 *                          batches per batch size and variant)
 *
 * 1. Boots the mesh (its own database and nats-server, as the other benches), registers a user
 *    through the gateway and opens its billing account (GET /v1/billing/balance).
 * 2. Seeds the workspace with BENCH_USAGE_ROWS usage rows in one INSERT … SELECT FROM
 *    generate_series (timed): 90 days up to now, 20 keys, 6 models that served (of 3 tiers), 2
 *    regions and rows without one; then the hourly and daily aggregates from those rows with the
 *    very aggregation of the migration's backfill (store/usage-rollups.ts rollupFromUsageRecordsSql,
 *    timed), then ANALYZE. The sums of the aggregates are checked against the rows.
 * 3. Times GET /v1/usage through the gateway (a user's session; 3 warm-ups, then
 *    BENCH_USAGE_RUNS sequential calls): 90 days of day buckets grouped by key, model, tier and
 *    region (the target), the same as CSV, and 31 days of hour buckets grouped by everything. The
 *    answer's request count must equal the rows seeded in its range.
 * 4. The cost of the aggregates per usage record, in a billing schema of its own on the same
 *    Postgres (runtime/src/in-process.ts, the settlement built as main.ts builds it), batches of
 *    32 and 256 records (the work consumer's largest) of 16 workspaces, alternating: the usage
 *    INSERT alone (store/usage.ts insertUsageRows), the INSERT with the two aggregate upserts
 *    (insertUsages, what the settlement runs), and the whole settlement of a batch
 *    (UsageSettlement.settle: accounts, the insert and aggregates, the ledger, the leases, the
 *    outbox), each in its transaction. The aggregates' share of a settled batch is
 *    (with − alone) ÷ settle: how much lower billing's settlement rate is for them, the bound of
 *    what they take from bench:billing's ingestion figure (the rest of the path is NATS, the
 *    relay and the keys service, which they do not touch).
 *
 * Targets, reported PASS/FAIL: the 90-day query's p50 < 300 ms and p95 < 300 ms; the aggregates'
 * share of a settled batch ≤ 10% (both batch sizes). Exits non-zero only when a check failed or
 * something crashed. Results: printed, and written to bench/results/usage-<time>.json.
 */
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { readBillingConfig } from '@switchboard/billing/config';
import { prepareBilling } from '@switchboard/billing/prepare';
import { insertUsageRows, insertUsages, type NewUsage } from '@switchboard/billing/store/usage';
import { readRollups, rollupFromUsageRecordsSql } from '@switchboard/billing/store/usage-rollups';
import { maxReportRows } from '@switchboard/billing/usage-report';
import { BillingService, UsageRecordSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { createDb } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import { inProcessService } from '@switchboard/runtime/in-process';
import { memberClaims, meshClient } from '@switchboard/runtime/testing';
import { registerUser } from '@switchboard/testkit/gateway-accounts';
import { latencyOf, percentileOf, round } from './measure/latency.js';
import { connectDatabase, postgresBackends } from './measure/postgres.js';
import { cpuMeter } from './measure/proc.js';
import { exitedComponents, inSession, startBenchMesh, startOwnNats } from './measure/session.js';
import { benchHeader, check, fmt, machineFacts, runBench, type TargetCheck } from './report.js';

const rows = Number(process.env.BENCH_USAGE_ROWS ?? 1_000_000);
const runs = Number(process.env.BENCH_USAGE_RUNS ?? 20);
const batches = Number(process.env.BENCH_USAGE_BATCHES ?? 60);
const targetMs = 300;
const maxShare = 0.1;
const dayMs = 24 * 3_600_000;

interface QueryTiming {
  name: string;
  query: string;
  rows: number;
  bytes: number;
  p50: number;
  p95: number;
  max: number;
  /** CPU ms per call: the gateway, billing, Postgres, this process. */
  cpuMsPerCall: Record<string, number>;
  hostBusyPercent: number;
}

interface SettlementTiming {
  batch: number;
  /** Milliseconds per record: the INSERT alone, with the aggregates, the whole settlement. */
  insertMsPerRecord: number;
  insertWithRollupsMsPerRecord: number;
  settleMsPerRecord: number;
  /** (with − alone) ÷ settle. */
  rollupShare: number;
}

const median = (values: number[]) =>
  percentileOf(
    [...values].sort((a, b) => a - b),
    50,
  );

runBench(() =>
  inSession('usage', async (session) => {
    const errors: string[] = [];
    const nats = await startOwnNats(session);
    session.progress('starting the mesh');
    const { mesh, meshStartSeconds } = await startBenchMesh(session, { env: { LOG_LEVEL: 'warn' } });
    const user = await registerUser(mesh.gatewayUrl, 'usage');
    const auth = { authorization: `Bearer ${user.accessToken}` };
    const opened = await fetch(`${mesh.gatewayUrl}/v1/billing/balance`, { headers: auth });
    if (opened.status !== 200) throw new Error(`GET /v1/billing/balance answered ${opened.status}`);
    const workspaceId = user.workspaceId;
    const db = await connectDatabase(mesh.env.DATABASE_URL);
    session.defer('database client', () => db.end());
    await db.query('SET search_path TO billing');

    // 2. Seeding.
    session.progress(`seeding ${rows} usage rows`);
    const now = Date.now();
    const seedStart = performance.now();
    await db.query(
      `INSERT INTO usage_records (id, generation_id, workspace_id, key_id, model, routed_model, tier, input_tokens, output_tokens, upstream_cost_usd,
                                  cost_usd, plan_id, pricing_version, occurred_at, region)
       SELECT 'usg_bench' || g, 'gen_bench' || g, $1, 'key_bench' || lpad((g % 20)::text, 2, '0'),
              (ARRAY['service/fast', 'service/fast', 'service/balanced', 'service/balanced', 'model-x', 'model-y'])[1 + g % 6],
              (ARRAY['m-small', 'm-small-cn', 'm-large', 'm-large-cn', NULL, NULL])[1 + g % 6],
              (ARRAY['fast', 'fast', 'balanced', 'balanced', 'passthrough', 'passthrough'])[1 + g % 6],
              100 + g % 900, 10 + g % 500, NULL, ((100 + g % 900) * 1 + (10 + g % 500) * 4) / 10000000.0, 'payg', '2026-11-01',
              to_timestamp($2 / 1000.0) - (g % (90 * 24 * 60 - 1) + 1) * interval '1 minute',
              (ARRAY['overseas', 'cn', NULL])[1 + g % 3]
         FROM generate_series(1, $3::int) AS g`,
      [workspaceId, now, rows],
    );
    const seedRowsSeconds = round((performance.now() - seedStart) / 1000, 1);
    const rollupSeconds: Record<string, number> = {};
    for (const bucket of ['hour', 'day'] as const) {
      const started = performance.now();
      await db.query(rollupFromUsageRecordsSql(bucket, `workspace_id = '${workspaceId}'`));
      rollupSeconds[bucket] = round((performance.now() - started) / 1000, 1);
    }
    await db.query('ANALYZE usage_records; ANALYZE usage_rollups_hourly; ANALYZE usage_rollups_daily');
    const sizes = await db.query<{ table: string; rows: string }>(
      `SELECT 'hourly' AS table, count(*)::text AS rows FROM usage_rollups_hourly WHERE workspace_id = $1
       UNION ALL SELECT 'daily', count(*)::text FROM usage_rollups_daily WHERE workspace_id = $1`,
      [workspaceId],
    );
    const rollupRows = Object.fromEntries(sizes.rows.map((row) => [row.table, Number(row.rows)]));
    const sums = await db.query<{ source: string; requests: string; cost: string }>(
      `SELECT 'rows' AS source, count(*)::text AS requests, sum(cost_usd)::text AS cost FROM usage_records WHERE workspace_id = $1
       UNION ALL SELECT 'daily', sum(requests)::text, sum(cost_usd)::text FROM usage_rollups_daily WHERE workspace_id = $1
       UNION ALL SELECT 'hourly', sum(requests)::text, sum(cost_usd)::text FROM usage_rollups_hourly WHERE workspace_id = $1`,
      [workspaceId],
    );
    const [raw, ...aggregated] = sums.rows;
    for (const sum of aggregated) {
      if (sum.requests !== raw.requests || sum.cost !== raw.cost)
        errors.push(`the ${sum.source} aggregates sum to ${sum.requests} / ${sum.cost}, the rows to ${raw.requests} / ${raw.cost}`);
    }

    // 3. Queries through the gateway, with the CPU each process spends on them.
    const watch = {
      gateway: [mesh.pid('gateway')],
      billing: [mesh.pid('billing')],
      postgres: await postgresBackends(mesh.env.DATABASE_URL, db),
      bench: [process.pid],
    };
    const iso = (at: number) => new Date(at).toISOString();
    const everything = 'group_by=key,model,tier,region';
    const shapes = [
      { name: '90 days, day buckets, group_by=key,model,tier,region', query: `start=${iso(now - 90 * dayMs)}&end=${iso(now)}&${everything}` },
      { name: 'the same as CSV', query: `start=${iso(now - 90 * dayMs)}&end=${iso(now)}&${everything}&format=csv` },
      { name: '31 days, hour buckets, group_by=key,model,tier,region', query: `start=${iso(now - 31 * dayMs)}&end=${iso(now)}&${everything}&bucket=hour` },
    ];
    const timings: QueryTiming[] = [];
    for (const shape of shapes) {
      session.progress(`timing ${shape.name}`);
      const times: number[] = [];
      let answer = '';
      const cpu = cpuMeter(watch);
      const cpuStarted = performance.now();
      // The hour report is 30 times the rows: fewer runs of it.
      const shapeRuns = shape.query.includes('bucket=hour') ? Math.min(runs, 5) : runs;
      for (let i = 0; i < 3 + shapeRuns; i++) {
        const started = performance.now();
        const response = await fetch(`${mesh.gatewayUrl}/v1/usage?${shape.query}`, { headers: auth });
        answer = await response.text();
        if (i >= 3) times.push(performance.now() - started);
        if (response.status !== 200) {
          errors.push(`${shape.name}: ${response.status} ${answer.slice(0, 200)}`);
          break;
        }
      }
      const used = cpu();
      const cpuSeconds = (performance.now() - cpuStarted) / 1000;
      /** CPU ms per call of each process group (warm-ups included in both the time and the calls). */
      const cpuMsPerCall = Object.fromEntries(
        Object.entries(used.processes).map(([name, percent]) => [name, round(((percent / 100) * cpuSeconds * 1000) / (3 + shapeRuns), 1)]),
      );
      let answerRows = 0;
      if (times.length < shapeRuns) continue;
      if (shape.query.includes('format=csv')) answerRows = answer.split('\r\n').length - 2;
      else {
        const data = (JSON.parse(answer) as { data?: Array<{ requests: string | number }> }).data ?? [];
        answerRows = data.length;
        if (shape.name.startsWith('90 days')) {
          const requests = data.reduce((sum, row) => sum + Number(row.requests), 0);
          if (requests !== rows) errors.push(`the 90-day report counts ${requests} requests, ${rows} were seeded`);
        }
      }
      const latency = latencyOf(times);
      timings.push({
        name: shape.name,
        query: shape.query,
        rows: answerRows,
        bytes: Buffer.byteLength(answer),
        p50: latency.p50,
        p95: round(percentileOf(Float64Array.from(times).sort(), 95)),
        max: latency.max,
        cpuMsPerCall,
        hostBusyPercent: used.hostBusyPercent,
      });
    }

    // Where the 90-day answer's time goes: the SQL alone (the store's query), the RPC (billing), REST (the gateway's JSON on top).
    session.progress('timing the 90-day query at the SQL and at the RPC');
    const store = createDb(mesh.env.DATABASE_URL, 'billing', 2);
    session.defer('store pool', () => store.destroy());
    const rpc = meshClient(
      BillingService,
      mesh.urls.billing,
      'billing',
      { ...memberClaims('owner'), principalId: user.userId, workspaceId },
      { meshSecret: mesh.env.SWITCHBOARD_MESH_SECRET },
    );
    const timedRuns = async (run: () => Promise<unknown>) => {
      const times: number[] = [];
      for (let i = 0; i < 3 + runs; i++) {
        const started = performance.now();
        await run();
        if (i >= 3) times.push(performance.now() - started);
      }
      const sorted = Float64Array.from(times).sort();
      return { p50: round(percentileOf(sorted, 50)), p95: round(percentileOf(sorted, 95)) };
    };
    const ninety = { from: new Date(Math.floor((now - 90 * dayMs) / dayMs) * dayMs), to: new Date(Math.ceil(now / dayMs) * dayMs) };
    const layers = {
      sql: await timedRuns(() =>
        readRollups(store, { workspaceId, bucket: 'day', ...ninety, groupBy: ['key_id', 'model', 'tier', 'region'], limit: maxReportRows + 1 }),
      ),
      rpc: await timedRuns(() => rpc.getUsageReport({ start: iso(now - 90 * dayMs), end: iso(now), groupBy: 'key,model,tier,region' })),
      rest: { p50: timings[0]?.p50, p95: timings[0]?.p95 },
    };

    // 4. The aggregates' cost per settled record.
    session.progress('timing the settlement with and without the aggregates');
    process.env.DATABASE_URL = mesh.env.DATABASE_URL;
    process.env.SWITCHBOARD_DATA_KEYS ??= mesh.env.SWITCHBOARD_DATA_KEYS;
    const service = await inProcessService('billing', new URL('../../services/billing/dist/migrations/', import.meta.url));
    session.defer('in-process billing schema', () => service.stop());
    const billing = prepareBilling(service.runtime, readBillingConfig({ BILLING_SANDBOX: 'true', SANDBOX_OPENING_CREDIT_USD: '1000000' }));
    const workspaces = Array.from({ length: 16 }, () => newId('org'));
    const records = (count: number) =>
      Array.from({ length: count }, (_, i) =>
        create(UsageRecordSchema, {
          generationId: newId('gen'),
          keyId: `key_${workspaces[i % 16]}`,
          workspaceId: workspaces[i % 16],
          model: 'service/fast',
          routedModel: i % 2 ? 'm-small' : 'm-small-cn',
          region: i % 2 ? 'overseas' : 'cn',
          inputTokens: 1000n,
          outputTokens: 500n,
          occurredAt: timestampFromDate(new Date()),
          costUsd: '0.0003',
          tier: 'fast',
          planId: 'payg',
          pricingVersion: '2026-11-01',
        }),
      );
    const usagesOf = (count: number): NewUsage[] =>
      records(count).map((record) => ({
        id: newId('usg'),
        generationId: record.generationId,
        workspaceId: record.workspaceId,
        keyId: record.keyId,
        model: record.model,
        routedModel: record.routedModel ?? null,
        tier: record.tier,
        inputTokens: record.inputTokens.toString(),
        outputTokens: record.outputTokens.toString(),
        upstreamCostUsd: null,
        costUsd: record.costUsd,
        planId: record.planId,
        pricingVersion: record.pricingVersion,
        reservationId: null,
        occurredAt: new Date(),
        facts: {
          region: record.region ?? null,
          streamed: null,
          status: null,
          latencyMs: null,
          timeToFirstTokenMs: null,
          overheadMs: null,
          conversationId: null,
        },
      }));
    const { db: knex } = service.runtime;
    // The accounts exist before the timing, as they do under steady traffic.
    await knex.transaction((trx) => billing.settlement.settle(records(16), trx));
    const settlements: SettlementTiming[] = [];
    for (const batch of [32, 256]) {
      const times = { alone: [] as number[], with: [] as number[], settle: [] as number[] };
      for (let i = 0; i < 3 + batches; i++) {
        // Alternating, so that drift (autovacuum, checkpoints) weighs on each variant alike.
        const alone = usagesOf(batch);
        const withRollups = usagesOf(batch);
        const settled = records(batch);
        const timed = async (run: () => Promise<unknown>) => {
          const started = performance.now();
          await run();
          return (performance.now() - started) / batch;
        };
        const a = await timed(() => knex.transaction((trx) => insertUsageRows(trx, alone)));
        const w = await timed(() => knex.transaction((trx) => insertUsages(trx, withRollups)));
        const s = await timed(() => knex.transaction((trx) => billing.settlement.settle(settled, trx)));
        if (i < 3) continue;
        times.alone.push(a);
        times.with.push(w);
        times.settle.push(s);
      }
      const [alone, withRollups, settle] = [median(times.alone), median(times.with), median(times.settle)];
      settlements.push({
        batch,
        insertMsPerRecord: round(alone, 4),
        insertWithRollupsMsPerRecord: round(withRollups, 4),
        settleMsPerRecord: round(settle, 4),
        rollupShare: round((withRollups - alone) / settle, 3),
      });
    }
    errors.push(...exitedComponents(mesh));

    const targets: TargetCheck[] = [
      check('GET /v1/usage, 90 days grouped by everything, p50 (ms)', timings[0].p50, '<', targetMs, 'ms'),
      check('GET /v1/usage, 90 days grouped by everything, p95 (ms)', timings[0].p95, '<', targetMs, 'ms'),
      ...settlements.map((s) => check(`aggregates' share of a settled batch of ${s.batch}`, s.rollupShare, '<=', maxShare, '')),
    ];
    const machine = machineFacts(session.loadAverageAtStart);
    const lines = [
      ...benchHeader('usage', session.at, machine, `the mesh (started in ${meshStartSeconds} s) and Postgres, ${nats.setup}`),
      '',
      `Seeding ${rows} usage rows of one workspace over 90 days: rows ${seedRowsSeconds} s; aggregates from them: hourly ${rollupSeconds.hour} s (${rollupRows.hourly} rows), daily ${rollupSeconds.day} s (${rollupRows.daily} rows)`,
      '',
      `GET /v1/usage through the gateway, ${runs} sequential calls after 3 warm-ups`,
      ...timings.map(
        (t) =>
          `  ${t.name}: p50 ${fmt(t.p50, 1)} ms, p95 ${fmt(t.p95, 1)} ms, max ${fmt(t.max, 1)} ms (${t.rows} rows, ${t.bytes} bytes); CPU ms per call ${Object.entries(
            t.cpuMsPerCall,
          )
            .map(([name, ms]) => `${name} ${ms}`)
            .join(', ')} (host ${t.hostBusyPercent}% busy)`,
      ),
      `  the 90-day query by layer, p50 / p95 ms: SQL ${fmt(layers.sql.p50, 1)} / ${fmt(layers.sql.p95, 1)}, RPC ${fmt(layers.rpc.p50, 1)} / ${fmt(layers.rpc.p95, 1)}, REST ${fmt(layers.rest.p50, 1)} / ${fmt(layers.rest.p95, 1)}`,
      '',
      `Settlement per usage record (median of ${batches} batches each, ms)`,
      ...settlements.map(
        (s) =>
          `  batch ${s.batch}: INSERT alone ${fmt(s.insertMsPerRecord, 4)}, INSERT + aggregates ${fmt(s.insertWithRollupsMsPerRecord, 4)}, whole settlement ${fmt(s.settleMsPerRecord, 4)}; aggregates ${fmt(s.rollupShare * 100, 1)}% of the settlement`,
      ),
    ];
    const report: Record<string, unknown> & { totalSeconds?: number } = {
      at: session.at,
      machine,
      setup: { rows, runs, batches, natsSetup: nats.setup, meshStartSeconds },
      seeding: { rowsSeconds: seedRowsSeconds, rollupSeconds, rollupRows },
      queries: timings,
      layers,
      settlements,
      targets,
      errors,
    };
    return session.finish({ lines, targets, errors, report });
  }),
);
