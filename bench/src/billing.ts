/**
 * Billing benchmark: usage ingestion end to end, as the data plane sends it (docs/money-path.md#usage):
 * UsageRecords published to the work stream and acknowledged by JetStream, settled by billing in
 * batches (the usage rows, one debit per workspace, the outbox), relayed to the event stream, and
 * applied by the keys service until every key's month-to-date spend is visible through REST;
 * against the raw Postgres insert rate measured in the same run (measure/inserts.ts runInsertLoop,
 * the settings of `npm run bench`). Then the same end to end through
 * `switchboard.billing.v1.UsageService/RecordUsage` (the contract other data planes use: docs/api/internal-calls.md#recordusage), as
 * a second line.
 *
 *   npm run bench:billing   (BENCH_DURATION_SECONDS, default 10: seconds of usages per feed;
 *                            BENCH_WARMUP_SECONDS, default 2; BENCH_BILLING_WORKSPACES, default 16;
 *                            BENCH_NODE_FLAGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile
 *                            the mesh)
 *
 * 1. Boots the mesh (its own database on the Postgres startMesh finds, dropped at the end when it
 *    is the local server; its own nats-server in a temp dir unless NATS_URL is set, else the
 *    namespace of its database, so no other mesh's consumers take its events or usage records),
 *    registers `workspaces` users through the gateway and creates a key in each one's personal
 *    workspace (POST /v1/keys). Several workspaces, as many data planes' traffic has.
 * 2. For each feed, the work stream then RecordUsage: a warm-up of BENCH_WARMUP_SECONDS, waited
 *    for until the keys service shows it; then 64 usages in flight from this process for
 *    BENCH_DURATION_SECONDS, each a distinct generation id of `service/fast` (1000 input, 500
 *    output tokens: 0.0003 USD under the default plan), the workspaces in turn. The work stream's
 *    records carry what the data plane's carry (key and workspace ids, tier fast, cost_usd priced
 *    with runtime/src/pricing.ts under the default plan, its pricing version; no lease ids: the
 *    bench reserved nothing), over one NATS connection (measure/usage-records.ts); RecordUsage goes
 *    over one h2c connection (Connect binary, a mesh token of caller "data-plane"). A usage is
 *    done end to end when the keys service counts it: after the last answer (JetStream's ack, or
 *    RecordUsage's), GET /v1/keys/{id} of every key is polled until its month_to_date_spend_usd
 *    is the sum of the costs answered for it (warm-ups and earlier feeds included). End-to-end
 *    rate = measured usages ÷ (time from the first measured send to when the last key's spend was
 *    seen complete); before that the bench polls billing's usage rows until it has them all, the
 *    same rate up to then is billing's share (settled, debited, its events in the outbox).
 * 3. The billing tables are checked against the answers (rows and sum per key, no unpublished
 *    outbox row left, one billing.usage.recorded per usage row), then the raw insert loop runs on
 *    the same database, the mesh idle.
 *
 * Target, reported PASS/FAIL (never a crash): work-stream end-to-end usages/s ÷ raw inserts/s ≥ 1.0.
 * Exits non-zero only when a usage failed, a check failed or something crashed. Results: printed,
 * and written to bench/results/billing-<time>.json.
 */
import { randomBytes } from 'node:crypto';
import { createAccounts } from './billing/accounts.js';
import { type EndToEnd, measureEndToEnd, warmUp } from './billing/end-to-end.js';
import { recordUsageFeed, workStreamFeed } from './billing/feeds.js';
import { billingPrintout } from './billing/printout.js';
import { billingResults } from './billing/results.js';
import { workspaces } from './billing/settings.js';
import { checkBillingTables } from './billing/tables.js';
import { measureInserts } from './measure/inserts.js';
import { connectDatabase, postgresBackends } from './measure/postgres.js';
import { exitedComponents, inSession, startBenchMesh, startOwnNats } from './measure/session.js';
import { runBench } from './report.js';

runBench(() =>
  inSession('billing', async (session) => {
    const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
    const nats = await startOwnNats(session, { note: ' with streams of this run', setup: ', streams of this run' });
    session.progress('starting the mesh');
    const { mesh, meshStartSeconds } = await startBenchMesh(session, {
      // One registration per workspace from this address: above identity's hourly default of 20 when many are asked for.
      // Its namespace follows its database: other meshes' consumers never see these events and records.
      env: { LOG_LEVEL: 'warn', REGISTRATIONS_PER_IP_PER_HOUR: '100000' },
    });

    session.progress(`creating ${workspaces} workspaces with a key each through the gateway`);
    const accounts = await createAccounts(mesh, workspaces);
    const db = await connectDatabase(mesh.env.DATABASE_URL);
    session.defer('database client', () => db.end());
    // Every process a usage passes through on its way to the key's spend, and the load generator.
    const watch = {
      billing: [mesh.pid('billing')],
      keys: [mesh.pid('keys')],
      conversations: [mesh.pid('conversations')],
      gateway: [mesh.pid('gateway')],
      postgres: await postgresBackends(mesh.env.DATABASE_URL, db),
      'nats-server': [nats.pid],
      'bench (load generator)': [process.pid],
    };

    const runs: EndToEnd[] = [];
    const warmUsages: Record<string, number> = {};
    for (const feed of [await workStreamFeed(session, mesh), await recordUsageFeed(session, mesh)]) {
      warmUsages[feed.key] = await warmUp(session, mesh, feed, accounts, runId);
      runs.push(await measureEndToEnd(session, { mesh, db, feed, accounts, runId, watch }));
    }
    const errors = runs.flatMap((run) => run.errors);
    if (runs.every((run) => run.visibleAt !== undefined)) errors.push(...(await checkBillingTables(db, accounts)));
    errors.push(...exitedComponents(mesh));

    const inserts = await measureInserts(mesh.env.DATABASE_URL, (message) => session.progress(message));
    const report = billingResults(session, { runs, watch, inserts, warmUsages, meshStartSeconds, natsSetup: nats.setup, errors });
    return session.finish({ lines: billingPrintout(report, runs), targets: report.targets, errors, report });
  }),
);
