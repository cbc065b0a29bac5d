/**
 * Conversations benchmark: `POST /v1/conversations/{id}/messages` through the gateway (the
 * gateway, the conversations service and its one-statement append under the conversation's row
 * lock) against the raw Postgres insert rate measured in the same run (measure/inserts.ts
 * runInsertLoop, the settings of `npm run bench`), and `GET /v1/conversations/{id}/messages?limit=100`
 * on a conversation of BENCH_LIST_MESSAGES messages under the same load.
 *
 *   npm run bench:conversations   (BENCH_DURATION_SECONDS, default 10: measured seconds per load;
 *                                  BENCH_WARMUP_SECONDS, default 2; BENCH_CONVERSATIONS, default 16;
 *                                  BENCH_LIST_MESSAGES, default 1000; BENCH_NODE_FLAGS, e.g.
 *                                  "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the mesh)
 *
 * 1. Boots the mesh (its own database on the Postgres startMesh finds, dropped at the end when it
 *    is the local server; its own nats-server in a temp dir unless NATS_URL is set), registers
 *    one user through the gateway and creates, in its personal workspace, `conversations`
 *    conversations to append to and one more filled with BENCH_LIST_MESSAGES messages (through
 *    the gateway, 16 at a time) to list.
 * 2. Appends (role user, 200 characters of content), autocannon with 64 connections
 *    (measure/load.ts): to ONE conversation, where every append queues on that conversation's row lock by
 *    design (README, "Conversations, feedback and routing"), then to `conversations`
 *    conversations at once, 64 ÷ `conversations` connections each (one autocannon per
 *    conversation, run together: req/s is their sum, p50/p99 the worst of them).
 * 3. Lists the first 100 messages of the filled conversation, 64 connections.
 * 4. Checks the tables: every conversation's messages have positions 1..message_count, no gap and
 *    no duplicate, at least as many as the 2xx answers; then the raw insert loop runs on the same
 *    database, the mesh idle.
 *
 * Target, reported PASS/FAIL (never a crash): appends/s to `conversations` conversations ÷ raw
 * inserts/s ≥ 0.25 (the one-conversation ratio is reported beside it). Exits non-zero only when a
 * request failed (non-2xx, error, timeout), a check failed or something crashed. Results:
 * printed, and written to bench/results/conversations-<time>.json.
 */

import { registerUser } from '@switchboard/testkit/gateway-accounts';
import { checkConversations } from './conversations/checks.js';
import { prepareConversations } from './conversations/gateway-calls.js';
import { runLoads } from './conversations/loads.js';
import { conversationsPrintout } from './conversations/printout.js';
import { conversationsResults } from './conversations/results.js';
import { measureInserts } from './measure/inserts.js';
import { connectDatabase } from './measure/postgres.js';
import { exitedComponents, inSession, startBenchMesh, startOwnNats } from './measure/session.js';
import { runBench } from './report.js';

runBench(() =>
  inSession('conversations', async (session) => {
    const nats = await startOwnNats(session);
    session.progress('starting the mesh');
    const { mesh, meshStartSeconds } = await startBenchMesh(session);
    const { accessToken: token } = await registerUser(mesh.gatewayUrl, 'conversations');
    const prepared = await prepareConversations(session, mesh.gatewayUrl, token);
    const db = await connectDatabase(mesh.env.DATABASE_URL);
    session.defer('database client', () => db.end());

    const loads = await runLoads(session, mesh, db, token, prepared);
    const { errors, stored } = await checkConversations(db, prepared, loads);
    errors.push(...exitedComponents(mesh));
    const inserts = await measureInserts(mesh.env.DATABASE_URL, (message) => session.progress(message));
    const report = conversationsResults(session, { prepared, loads, stored, inserts, meshStartSeconds, natsSetup: nats.setup, errors });
    return session.finish({ lines: conversationsPrintout(report, loads), targets: report.targets, errors, report });
  }),
);
