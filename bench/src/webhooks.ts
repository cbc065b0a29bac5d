/**
 * Webhooks benchmark: events published through `switchboard.webhooks.v1.EventService/PublishEvent`
 * (caller "data-plane") until the receiver has each one (the outbox row and the delivery rows in
 * one transaction, the dispatcher's claim, the signed HTTPS POST and the attempt recorded), against
 * the JetStream acknowledged-publish rate measured in the same run on the same nats-server.
 *
 *   npm run bench:webhooks   (BENCH_WEBHOOK_EVENTS, default 3000: events of the throughput run;
 *                             BENCH_WEBHOOK_WARMUP_EVENTS, default 500; BENCH_LATENCY_SECONDS,
 *                             default 10; BENCH_JETSTREAM_SECONDS, default 3: per JetStream run;
 *                             BENCH_WEBHOOK_ENDPOINT_CONCURRENCY, default 32; BENCH_NODE_FLAGS, e.g.
 *                             "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the mesh)
 *
 * 1. Boots the mesh (its own database on the Postgres startMesh finds, dropped at the end when it
 *    is the local server; its own nats-server in a temp dir unless NATS_URL is set) with
 *    WEBHOOKS_ALLOW_PRIVATE_TARGETS=true, NODE_EXTRA_CA_CERTS of a throwaway certificate and
 *    WEBHOOK_ENDPOINT_CONCURRENCY raised; starts an HTTPS receiver in this process on 127.0.0.1
 *    that answers 204 at once; registers one user and one endpoint, https://localhost:<port>/,
 *    subscribed to agent.completed.
 * 2. JetStream baseline: a temporary file stream (BENCH_WEBHOOKS_<pid>, subjects
 *    bench.webhooks.<pid>.>, deleted after), 64 acknowledged publishes in flight of a message the
 *    size of an event envelope, before and after the webhook run (rate: their mean).
 * 3. Throughput: after a warm-up of BENCH_WEBHOOK_WARMUP_EVENTS events (all received), 64
 *    PublishEvent calls in flight for BENCH_WEBHOOK_EVENTS events; rate = events ÷ (first publish
 *    → last event received).
 * 4. Latency: open loop at half the measured rate for BENCH_LATENCY_SECONDS (each publish starts
 *    at its time whatever the others do): p50/p99 of publish start → arrival at the receiver.
 * 5. Checks: every event arrived exactly once, and every delivery row succeeded in one attempt,
 *    none failed (the receiver answers at once: a second attempt or arrival is a fault).
 * 6. Fairness (docs/webhooks.md#fairness): workspace A's 40 endpoints answer after 14 s with 1,000
 *    events queued for them; workspace B's one healthy endpoint gets 200 events meanwhile: B's
 *    p99 event → receipt (bench/src/webhooks/fairness.ts).
 * 7. The baseline: the raw Postgres single-row insert loop of `npm run bench` on the same
 *    database, the mesh idle; for reference, the database's transactions and rows per event of
 *    the throughput run (pg_stat_database). CPU per event of each process (/proc/<pid>/stat) is in the
 *    report: it is what bounds the rate on a small host.
 *
 * Targets, reported PASS/FAIL (never a crash): webhook deliveries/s ÷ raw single-row inserts/s
 * ≥ 0.5, p99 event → receipt < 50 ms at half the measured rate, and B's p99 < 1 s in the
 * fairness scenario. Exits non-zero only when a call
 * failed, an event was lost, a check failed or something crashed. Results: printed, and written to
 * bench/results/webhooks-<time>.json.
 */
import { measureInserts } from './measure/inserts.js';
import { databaseActivity, statsFlushMs } from './measure/postgres.js';
import { exitedComponents, inSession } from './measure/session.js';
import { runBench } from './report.js';
import { deliveryLog } from './webhooks/delivery-log.js';
import { fairnessRun } from './webhooks/fairness.js';
import { jetstreamBaseline, latencyRun, throughputRun, untilFlushed, warmUp, watchOf } from './webhooks/phases.js';
import { webhooksPrintout } from './webhooks/printout.js';
import { webhooksErrors, webhooksResults } from './webhooks/results.js';
import { concurrency, events, jetstreamSeconds, warmupEvents } from './webhooks/settings.js';
import { startWebhooksWorld } from './webhooks/world.js';

runBench(() =>
  inSession('webhooks', async (session) => {
    const world = await startWebhooksWorld(session);
    const { mesh, db } = world;
    const warm = await warmUp(session, world);
    const watch = await watchOf(world);

    const jetstream = await jetstreamBaseline(session, world);
    session.progress(
      `JetStream baseline 1/2: ${concurrency} acknowledged publishes in flight, ${jetstreamSeconds} s, ${Buffer.byteLength(jetstream.payload)}-byte messages`,
    );
    const jsBefore = await jetstream.run();
    await untilFlushed(warm.endedAt, statsFlushMs);
    const statsBefore = await databaseActivity(db);
    const throughput = await throughputRun(session, world, watch);
    session.progress(`JetStream baseline 2/2: ${jetstreamSeconds} s`);
    const jsAfter = await jetstream.run();
    session.progress('reading the database counters of the throughput run once every backend has flushed them');
    await untilFlushed(throughput.lastArrival ?? performance.now(), statsFlushMs);
    const statsAfter = await databaseActivity(db);
    const latency = await latencyRun(session, world, watch, throughput.eventsPerSecond);

    // Every delivery of this endpoint succeeded in one attempt.
    const expectedDeliveries = 1 + warmupEvents + events + latency.count;
    const log = await deliveryLog(db, world.webhookId, expectedDeliveries);
    session.progress('fairness: 40 endpoints answering after 14 s with 1,000 events queued, beside one healthy endpoint of another workspace');
    const fairness = await fairnessRun(session, world);
    const inserts = await measureInserts(mesh.env.DATABASE_URL, (message) => session.progress(message), ', for reference');
    const measured = {
      world,
      warm,
      watch,
      jetstream: { payload: jetstream.payload, before: jsBefore, after: jsAfter },
      throughput,
      latency,
      stats: { before: statsBefore, after: statsAfter },
      log,
      expectedDeliveries,
      fairness,
      inserts,
    };
    const errors = [...webhooksErrors(measured), ...exitedComponents(mesh)];
    const report = webhooksResults(session, measured, errors);
    return session.finish({ lines: webhooksPrintout(report, measured), targets: report.targets, errors, report });
  }),
);
