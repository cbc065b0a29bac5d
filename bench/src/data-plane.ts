/**
 * Data plane benchmark: `POST /v1/chat/completions` through the front door against the same
 * request sent straight to the upstream, in the same run. The path (docs/money-path.md): client
 * → gateway → data plane (the key from its replica, the estimate reserved against its leases,
 * [service/fast: a pick from its routing replica], priced with the shared pricing module, no RPC
 * and no SQL) → upstream → the usage record published to the work stream and acknowledged by
 * JetStream before the answer's last byte → client; afterwards billing settles the records in
 * batches and keys applies billing's events to the key's spend.
 *
 *   npm run bench:data-plane   (BENCH_DURATION_SECONDS, default 10: measured seconds per target at
 *                               64 in flight; BENCH_WARMUP_SECONDS, default 2; BENCH_LOW_LOAD_SECONDS,
 *                               default 6: measured seconds per target at 1 and at 4 in flight;
 *                               BENCH_NODE_FLAGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to
 *                               profile the mesh)
 *
 * 1. Starts the test upstream (`OpenAiUpstream` of the runtime, 8-token answers) in a child
 *    process of its own (data-plane/upstream-child.ts), so its CPU is measured apart from the load
 *    generator's; writes a temporary model catalog whose two regions both point at it (one
 *    passthrough model, two `fast` candidates, one `balanced`, prices "0.000001" per 1M tokens);
 *    boots the mesh with SWITCHBOARD_MODELS_FILE set to it (its own database on the Postgres
 *    startMesh finds, dropped at the end when it is the local server; its own nats-server unless
 *    NATS_URL is set); registers a user, tops its workspace up by 10.00 USD through the sandbox
 *    checkout (POST /v1/billing/topup, then POST <checkout_url>/complete) and creates an API key.
 * 2. Throughput, 64 requests in flight over a keep-alive http.Agent (one per target, the same
 *    settings): for non-streaming and for streaming (`stream: true`, the SSE read to its end),
 *    direct (the upstream's own /v1/chat/completions: the baseline) and front door (the gateway
 *    with the API key, a passthrough catalog model) interleaved direct, front, front, direct, half
 *    the duration each, after a warm-up of each; then `service/fast` non-streaming through the
 *    front door. Direct requests ask for `stream_options.include_usage` on streams, as the data
 *    plane does, so the upstream does the same work for both.
 * 3. Latency at low load, where queueing does not hide it: 1 and 4 requests in flight, the same
 *    interleaving (BENCH_LOW_LOAD_SECONDS per target), non-streaming and streaming; service/fast
 *    at 1 in flight. Added latency = front door p50 − direct p50, and p99 − p99.
 *    Then 1 in flight with a 40 ms pause after each answer (direct and front door, non-streaming
 *    and streaming, 8 s each): back to back, the work each request leaves behind (billing's
 *    settlement, the relay, the keys and conversations consumers) runs meanwhile; paced, it is
 *    done before the next request, and every hop of the path wakes an idle process.
 *    Then the same front-door request with the account's key that has every limit set (scopes,
 *    expiry, allowed models, rate limits of every dimension, spend limits of every period, each
 *    far above what the bench reaches) next to its key without limits, interleaved, at 64 and at
 *    1 in flight: what the limits' checks and leases cost (issue 25: within 10 % of req/s).
 *    Then the steps of a request alone, 1 in flight, 3 s each: a whole request to the data plane
 *    without the gateway; GET /v1/models on the data plane and through the gateway (the gateway's
 *    hop); a UsageRecord published to the work stream and acknowledged, as the data plane does
 *    (measure/usage-records.ts; billing settles it and its cost is counted with the answers').
 * 4. CPU per request of each process (/proc/<pid>/stat) over each measured run: the gateway, the
 *    data plane, keys, billing, conversations, identity and webhooks, the Postgres backends of the
 *    bench database, the nats-server (together: the platform), the upstream and this process (the
 *    load generator); and from the service/fast run at 64 in flight to the end of the paced runs,
 *    pg_stat_database's transactions and rows and the RPCs the services served (their
 *    rpc_server_duration_seconds counts on /metrics), per front-door request.
 * 5. Checks: every answer is 200 with a complete body (a JSON completion with content; a stream
 *    ending in `data: [DONE]` with no error event; from the platform, a `service` object with a
 *    cost); the upstream got exactly one call per request sent to it; once settled (polled:
 *    settlement is asynchronous), the key's month-to-date spend and the workspace's balance moved
 *    by exactly the sum of the costs the platform answered and the steps published.
 *
 * Targets (docs/money-path.md, issue 23), reported PASS/FAIL (never a crash): at 1 in flight,
 * added p50 < 1 ms and added p99 < 3 ms (non-streaming and streaming, back to back and paced);
 * ≥ 2,000 req/s at 64 in flight (passthrough, service/fast, streaming); ≤ 1 ms of CPU per request
 * summed over the platform's processes (at 64 in flight, each of the three); ≤ 0.1 Postgres
 * transactions per front-door request. Front door ÷ direct req/s is printed as information.
 * Exits non-zero only when a request failed, a check failed or something crashed. Results:
 * printed, and written to bench/results/data-plane-<time>.json.
 */

import { dataPlaneErrors, meshWarnings, settleBilling } from './data-plane/checks.js';
import { limitsPhase, lowLoadPhase, pacedPhase, throughputPhase } from './data-plane/phases.js';
import { dataPlanePrintout } from './data-plane/printout.js';
import { type DataPlaneMeasured, dataPlaneResults } from './data-plane/results.js';
import { stagesPhase } from './data-plane/stages.js';
import { Traffic } from './data-plane/traffic.js';
import { startDataPlaneWorld, watchOf } from './data-plane/world.js';
import { sleep } from './measure/loop.js';
import { databaseActivity, statsFlushMs } from './measure/postgres.js';
import { rpcCalls } from './measure/rpc-calls.js';
import { inSession } from './measure/session.js';
import { runBench } from './report.js';

runBench(() =>
  inSession('data-plane', async (session) => {
    const world = await startDataPlaneWorld(session);
    const traffic = new Traffic(session, world);
    await traffic.checkFirstRequests();
    const watch = watchOf(world);

    const { throughput, activityBefore, rpcBefore, frontSentBefore, fastFrontSent } = await throughputPhase(session, world, traffic, watch);
    const lowLoad = await lowLoadPhase(session, traffic, watch);
    const paced = await pacedPhase(session, traffic, watch);
    // The counters of the front-door requests since the fast run, before the steps below add more.
    const rpcAfter = await rpcCalls(world.mesh.metricsUrls);
    session.progress('waiting for the database counters to flush');
    await sleep(statsFlushMs);
    const frontActivity = {
      before: activityBefore,
      after: await databaseActivity(world.db),
      rpcBefore,
      rpcAfter,
      requests: traffic.platformRequestsSent - frontSentBefore,
    };
    const keyLimits = await limitsPhase(session, traffic, watch);
    const stages = await stagesPhase(session, world, traffic, watch);

    const settled = await settleBilling(session, world, traffic);
    const summaries = [throughput, lowLoad, paced, keyLimits, stages].flatMap((runs) => Object.values(runs));
    const errors = dataPlaneErrors(world, traffic, summaries, settled);
    const measured: DataPlaneMeasured = {
      world,
      traffic,
      throughput,
      lowLoad,
      paced,
      keyLimits,
      stages,
      frontActivity,
      fastFrontSent,
      settled,
      warnings: meshWarnings(world.mesh),
    };
    const report = dataPlaneResults(session, measured, errors);
    return session.finish({ lines: dataPlanePrintout(report, measured), targets: report.targets, errors, report });
  }),
);
