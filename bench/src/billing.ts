/**
 * Billing benchmark: `switchboard.billing.v1.UsageService/RecordUsage` end to end (the debit, its
 * outbox row, the relay to JetStream and the keys service's month-to-date spend of the key
 * updated and visible through REST) against the raw Postgres insert rate measured in the same run
 * (measure/inserts.ts runInsertLoop, the settings of `npm run bench`).
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
import { createAccounts } from './billing/accounts.js';
import { measureEndToEnd, warmUp } from './billing/end-to-end.js';
import { billingPrintout } from './billing/printout.js';
import { usageRecorder } from './billing/record-usage.js';
import { billingResults } from './billing/results.js';
import { workspaces } from './billing/settings.js';
import { checkBillingTables } from './billing/tables.js';
import { measureInserts } from './measure/inserts.js';
import { connectDatabase } from './measure/postgres.js';
import { exitedComponents, inSession, startBenchMesh, startOwnNats } from './measure/session.js';
import { runBench } from './report.js';

runBench(() =>
  inSession('billing', async (session) => {
    const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
    const nats = await startOwnNats(session, { note: ' with a stream of this run', setup: ', stream of this run' });
    // Without a server of its own, a stream and subjects of its own: other meshes' consumers never see these events.
    const eventsEnv: Record<string, string> = nats.pid ? {} : { EVENTS_SUBJECT_PREFIX: `benchbilling.${runId}`, EVENTS_STREAM: `BENCH_BILLING_${runId}` };
    session.progress('starting the mesh');
    const { mesh, meshStartSeconds } = await startBenchMesh(session, {
      // One registration per workspace from this address: above identity's hourly default of 20 when many are asked for.
      env: { LOG_LEVEL: 'warn', REGISTRATIONS_PER_IP_PER_HOUR: '100000', ...eventsEnv },
    });

    session.progress(`creating ${workspaces} workspaces with a key each through the gateway`);
    const accounts = await createAccounts(mesh, workspaces);
    const record = await usageRecorder(session, mesh);
    const db = await connectDatabase(mesh.env.DATABASE_URL);
    session.defer('database client', () => db.end());

    const warmUsages = await warmUp(session, mesh, record, accounts, runId);
    const e2e = await measureEndToEnd(session, { mesh, db, natsPid: nats.pid, record, accounts, runId, warmUsages });
    const { run } = e2e;
    const errors = e2e.errors;
    if (run.errors + run.failed > 0) errors.push(`RecordUsage: ${run.failed} wrong answers, ${run.errors} errors (first: ${run.firstProblem})`);
    if (e2e.visibleAt !== undefined) errors.push(...(await checkBillingTables(db, accounts)));
    errors.push(...exitedComponents(mesh));

    const inserts = await measureInserts(mesh.env.DATABASE_URL, (message) => session.progress(message));
    const report = billingResults(session, { e2e, inserts, warmUsages, meshStartSeconds, natsSetup: nats.setup, errors });
    return session.finish({ lines: billingPrintout(report, e2e), targets: report.targets, errors, report });
  }),
);
