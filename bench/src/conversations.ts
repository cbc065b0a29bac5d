/**
 * Conversations benchmark: `POST /v1/conversations/{id}/messages` through the gateway (the
 * gateway, the conversations service and its one-statement append under the conversation's row
 * lock) against the raw Postgres insert rate measured in the same run (baselines.ts
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
 *    (load.ts): to ONE conversation, where every append queues on that conversation's row lock by
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
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { components, type Mesh, startMesh } from '@switchboard/runtime/dev/mesh';
import { dropDatabase, startNatsServer } from '@switchboard/runtime/infra';
import pg from 'pg';
import { type InsertLoopResult, runInsertLoop } from './measure/inserts.js';
import { type CpuWatch, type LoadResult, runLoad, type Target } from './measure/load.js';
import { type CpuUse, readMemory } from './measure/proc.js';
import { check, finishBench, fmt, machineFacts, runBench, type TargetCheck, table } from './report.js';
import { durationSeconds, registerUser, warmupSeconds } from './scenarios.js';

const resultsDir = fileURLToPath(new URL('../results/', import.meta.url));
const connections = 64;
const positiveInt = (name: string, fallback: number, max: number) => {
  const raw = process.env[name];
  return raw && /^[1-9]\d*$/.test(raw) ? Math.min(Number(raw), max) : fallback;
};
/** Conversations appended to at once; a divisor of 64 keeps the connections even. */
const conversations = positiveInt('BENCH_CONVERSATIONS', 16, connections);
/** Messages of the conversation the listing reads (it reads the first 100). */
const listMessages = Math.max(positiveInt('BENCH_LIST_MESSAGES', 1000, 100_000), 100);
const listLimit = 100;
const minRatio = 0.25;
/** The raw insert loop of `npm run bench` (bench/src/run.ts), so every bench compares with the same reference. */
const insertLoop = { concurrency: 16, maxInserts: 200_000, maxSeconds: 5, warmupInserts: 1_000 };
/** Appends in flight while the listed conversation is filled. */
const fillConcurrency = 16;
/** 200 characters, the content of every appended message. */
const content = 'The quick brown fox jumps over the lazy dog while the bench appends one more message to a conversation, '.repeat(2).slice(0, 200);

const progress = (message: string) => process.stderr.write(`[bench:conversations] ${message}\n`);
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

/** One request through the gateway as the user: the parsed JSON of an answer with the expected status. */
async function call(gatewayUrl: string, token: string, method: string, pathname: string, expected: number, body?: unknown): Promise<unknown> {
  const response = await fetch(`${gatewayUrl}${pathname}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await response.text();
  if (response.status !== expected) throw new Error(`${method} ${pathname} answered ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as unknown;
}

async function createConversation(gatewayUrl: string, token: string, title: string): Promise<string> {
  const json = (await call(gatewayUrl, token, 'POST', '/v1/conversations', 201, { title, metadata: { bench: 'conversations' } })) as {
    conversation_id?: string;
  };
  if (!json.conversation_id) throw new Error(`POST /v1/conversations: no conversation_id in ${JSON.stringify(json).slice(0, 500)}`);
  return json.conversation_id;
}

/** Appends `count` messages to the conversation, `fillConcurrency` at a time. */
async function fill(gatewayUrl: string, token: string, conversationId: string, count: number): Promise<void> {
  let issued = 0;
  const worker = async () => {
    while (issued < count) {
      const n = issued++;
      await call(gatewayUrl, token, 'POST', `/v1/conversations/${conversationId}/messages`, 201, {
        role: n % 2 === 0 ? 'user' : 'assistant',
        content,
      });
    }
  };
  await Promise.all(Array.from({ length: fillConcurrency }, worker));
}

/** The Postgres backends serving the bench database (their CPU is the database's share), when Postgres runs on this host. */
async function postgresBackends(db: pg.Client, databaseUrl: string): Promise<number[]> {
  if (!['127.0.0.1', 'localhost'].includes(new URL(databaseUrl).hostname)) return [];
  const { rows } = await db.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
  );
  return rows.map((row) => row.pid);
}

interface LoadSummary {
  /** How many autocannon instances ran together (one per conversation). */
  parts: number;
  connections: number;
  durationSeconds: number;
  requests: number;
  /** 2xx per second, summed over the parts. */
  rps: number;
  /** One part: its own; several: the worst part's. */
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  cpu: CpuUse;
}

/** The parts of one load, run at the same time: rates add up, the latencies are the worst part's. */
function merge(results: LoadResult[]): LoadSummary {
  const statusCodes: Record<string, number> = {};
  for (const r of results) for (const [code, count] of Object.entries(r.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + count;
  const worst = (pick: (r: LoadResult) => number) => Math.max(...results.map(pick));
  return {
    parts: results.length,
    connections: results.reduce((sum, r) => sum + r.connections, 0),
    durationSeconds: round(worst((r) => r.durationSeconds)),
    requests: results.reduce((sum, r) => sum + r.requests, 0),
    rps: results.reduce((sum, r) => sum + r.rps, 0),
    latencyMs: {
      p50: worst((r) => r.latencyMs.p50),
      p90: worst((r) => r.latencyMs.p90),
      p99: worst((r) => r.latencyMs.p99),
      max: worst((r) => r.latencyMs.max),
    },
    non2xx: results.reduce((sum, r) => sum + r.non2xx, 0),
    errors: results.reduce((sum, r) => sum + r.errors, 0),
    timeouts: results.reduce((sum, r) => sum + r.timeouts, 0),
    statusCodes,
    // The first part measured the watched processes (the others only the load generator, the same process).
    cpu: results[0].cpu,
  };
}

/** Every conversation's messages at positions 1..message_count: no gap, no duplicate, no fewer than answered 201. */
async function checkMessages(db: pg.Client, minimum: Map<string, number>): Promise<{ problems: string[]; stored: Record<string, number> }> {
  const { rows } = await db.query<{ id: string; message_count: string; rows: string; distinct_positions: string; min: string | null; max: string | null }>(
    `SELECT c.id, c.message_count::text, count(m.id)::text AS rows, count(DISTINCT m.position)::text AS distinct_positions,
            min(m.position)::text AS min, max(m.position)::text AS max
       FROM conversations.conversations c LEFT JOIN conversations.messages m ON m.conversation_id = c.id
      WHERE c.id = ANY($1) GROUP BY c.id, c.message_count`,
    [[...minimum.keys()]],
  );
  const problems: string[] = [];
  const stored: Record<string, number> = {};
  for (const [id, least] of minimum) {
    const row = rows.find((r) => r.id === id);
    if (!row) {
      problems.push(`conversation ${id} is gone`);
      continue;
    }
    const count = Number(row.rows);
    stored[id] = count;
    const contiguous = count === 0 || (row.min === '1' && row.max === row.message_count && row.distinct_positions === row.rows);
    if (!contiguous || row.message_count !== row.rows)
      problems.push(
        `conversation ${id}: ${row.rows} messages (${row.distinct_positions} positions, ${row.min}..${row.max}), message_count ${row.message_count}`,
      );
    if (count < least) problems.push(`conversation ${id}: ${count} messages stored, fewer than the ${least} appends answered 201`);
  }
  return { problems, stored };
}

const loadRow = (name: string, s: LoadSummary, ratio: number | undefined) => [
  name,
  fmt(s.connections),
  fmt(s.rps),
  fmt(s.latencyMs.p50, 1),
  fmt(s.latencyMs.p99, 1),
  fmt(s.latencyMs.max, 1),
  fmt(s.non2xx + s.errors + s.timeouts),
  ratio === undefined ? '-' : ratio.toFixed(2),
];

async function main(): Promise<number> {
  const started = performance.now();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-conversations-'));
  const database = `switchboard_bench_conversations_${process.pid}_${Date.now().toString(36)}`;
  const at = new Date().toISOString();
  const loadAverageAtStart = os.loadavg().map((l) => round(l));
  const cleanups: Array<() => Promise<void>> = [];
  try {
    let natsSetup = 'NATS_URL';
    if (!process.env.NATS_URL) {
      try {
        const nats = await startNatsServer(path.join(dataDir, 'nats'));
        cleanups.push(() => nats.stop!());
        process.env.NATS_URL = nats.url;
        natsSetup = 'own nats-server';
      } catch (err) {
        progress(`could not start a nats-server of its own (${(err as Error).message}); using the mesh's discovery`);
        natsSetup = 'discovered by startMesh';
      }
    }
    if (!process.env.DATABASE_URL) cleanups.push(() => dropDatabase(`postgres://postgres@127.0.0.1:5432/${database}`).catch(() => undefined));

    progress('starting the mesh');
    const nodeFlags = process.env.BENCH_NODE_FLAGS?.split(' ').filter(Boolean);
    const mesh: Mesh = await startMesh({ dataDir, randomPorts: true, database, nodeFlags, env: { LOG_LEVEL: 'warn' } });
    cleanups.push(() => mesh.stop());
    const meshStartSeconds = round((performance.now() - started) / 1000, 1);

    const user = await registerUser(mesh.gatewayUrl, 'conversations');
    const token = user.accessToken;
    progress(`creating ${conversations} conversations to append to, and one of ${listMessages} messages to list`);
    const appendTo: string[] = [];
    for (let i = 0; i < conversations; i++) appendTo.push(await createConversation(mesh.gatewayUrl, token, `bench append ${i + 1}`));
    const listed = await createConversation(mesh.gatewayUrl, token, 'bench list');
    const fillStarted = performance.now();
    await fill(mesh.gatewayUrl, token, listed, listMessages);
    const fillSeconds = round((performance.now() - fillStarted) / 1000);

    const auth = { authorization: `Bearer ${token}` };
    const appendTarget = (id: string): Target => ({
      url: `${mesh.gatewayUrl}/v1/conversations/${id}/messages`,
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ role: 'user', content }),
    });
    const listTarget: Target = { url: `${mesh.gatewayUrl}/v1/conversations/${listed}/messages?limit=${listLimit}`, method: 'GET', headers: auth };
    // The listing answers what it should before any load: the first 100 of the filled conversation, more after them.
    const page = (await call(mesh.gatewayUrl, token, 'GET', `/v1/conversations/${listed}/messages?limit=${listLimit}`, 200)) as {
      data?: Array<{ content?: string }>;
      has_more?: boolean;
    };
    if (page.data?.length !== listLimit || page.has_more !== true || page.data[0].content !== content)
      throw new Error(`GET …/messages?limit=${listLimit}: ${page.data?.length} messages, has_more ${page.has_more}; expected ${listLimit} and true`);
    const listBytes = Buffer.byteLength(JSON.stringify(page));

    const db = new pg.Client({ connectionString: mesh.env.DATABASE_URL, connectionTimeoutMillis: 3000 });
    await db.connect();
    cleanups.push(() => db.end());
    const watch: CpuWatch = async () => ({
      gateway: [mesh.pid('gateway')],
      conversations: [mesh.pid('conversations')],
      identity: [mesh.pid('identity')],
      postgres: await postgresBackends(db, mesh.env.DATABASE_URL),
    });
    const shape = { connections, durationSeconds, warmupSeconds };

    progress(`append to 1 conversation: ${connections} connections, ${warmupSeconds} s warm-up, ${durationSeconds} s`);
    const one = merge([await runLoad(appendTarget(appendTo[0]), shape, watch)]);

    const perConversation = Math.max(1, Math.floor(connections / conversations));
    progress(`append to ${conversations} conversations: ${perConversation} connections each, ${warmupSeconds} s warm-up, ${durationSeconds} s`);
    const many = merge(
      await Promise.all(appendTo.map((id, i) => runLoad(appendTarget(id), { ...shape, connections: perConversation }, i === 0 ? watch : undefined))),
    );

    progress(`list ${listLimit} of ${listMessages} messages: ${connections} connections, ${warmupSeconds} s warm-up, ${durationSeconds} s`);
    const list = merge([await runLoad(listTarget, shape, watch)]);

    const errors: string[] = [];
    for (const [name, s] of [
      ['append, 1 conversation', one],
      [`append, ${conversations} conversations`, many],
      ['list', list],
    ] as const) {
      if (s.non2xx + s.errors + s.timeouts > 0)
        errors.push(`${name}: ${s.non2xx} non-2xx (${JSON.stringify(s.statusCodes)}), ${s.errors} errors, ${s.timeouts} timeouts`);
    }
    // Lower bounds of what each conversation must hold (the warm-up's appends are not counted by autocannon).
    const answered = (s: LoadSummary) => s.statusCodes['201'] ?? 0;
    const minimum = new Map<string, number>(appendTo.map((id) => [id, 0]));
    minimum.set(appendTo[0], answered(one));
    minimum.set(listed, listMessages);
    const { problems, stored } = await checkMessages(db, minimum);
    errors.push(...problems);
    const storedInAppended = appendTo.reduce((sum, id) => sum + (stored[id] ?? 0), 0);
    if (storedInAppended < answered(one) + answered(many))
      errors.push(`${answered(one) + answered(many)} appends answered 201, but the conversations appended to hold ${storedInAppended} messages`);
    if ((stored[listed] ?? 0) !== listMessages) errors.push(`the listed conversation holds ${stored[listed]} messages, not ${listMessages}`);
    for (const component of components) {
      if (!readMemory(mesh.pid(component))) errors.push(`${component} exited during the bench:\n${mesh.output(component).split('\n').slice(-20).join('\n')}`);
    }

    progress(`raw Postgres insert loop (${insertLoop.maxInserts} rows or ${insertLoop.maxSeconds} s, concurrency ${insertLoop.concurrency})`);
    const inserts: InsertLoopResult = await runInsertLoop({ databaseUrl: mesh.env.DATABASE_URL, ...insertLoop });

    const toInserts = (rps: number) => (inserts.insertsPerSecond > 0 ? round(rps / inserts.insertsPerSecond, 3) : 0);
    const ratioOne = toInserts(one.rps);
    const ratioMany = toInserts(many.rps);
    const targets: TargetCheck[] = [check(`appends/s (${conversations} conversations) ÷ raw Postgres inserts/s`, ratioMany, '>=', minRatio, 'ratio')];

    const report = {
      at,
      machine: machineFacts(loadAverageAtStart),
      settings: {
        connections,
        conversations,
        connectionsPerConversation: perConversation,
        durationSeconds,
        warmupSeconds,
        contentCharacters: content.length,
        listMessages,
        listLimit,
        listResponseBytes: listBytes,
        nats: natsSetup,
        insertLoop,
      },
      meshStartSeconds,
      fill: { messages: listMessages, seconds: fillSeconds, concurrency: fillConcurrency },
      append: {
        oneConversation: { ...one, ratioToInserts: ratioOne },
        manyConversations: { ...many, ratioToInserts: ratioMany },
      },
      list,
      storedMessages: stored,
      postgresInserts: inserts,
      targets,
      errors,
      totalSeconds: 0,
    };

    const out: string[] = [];
    out.push(`Switchboard bench:conversations  ${at}`);
    out.push(
      `  node ${process.version}, ${report.machine.cpus} CPU (${report.machine.model}), load avg at start ${loadAverageAtStart.join(' ')}, at end ${report.machine.loadAverageAtEnd.join(' ')}; the load generator is this process, on the same cores`,
    );
    out.push(
      `  mesh ready in ${meshStartSeconds} s; NATS: ${natsSetup}; one user; the listed conversation filled with ${listMessages} messages in ${fillSeconds} s (${fillConcurrency} at a time)`,
    );
    out.push('');
    out.push(
      `Through the gateway (autocannon), ${durationSeconds} s measured after ${warmupSeconds} s warm-up each; appends: role user, ${content.length} characters; ${conversations} conversations: one autocannon each, run together (req/s summed, p50/p99/max the worst one's)`,
    );
    out.push(
      table(
        ['load', 'conns', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'failed', '÷ raw inserts'],
        [
          loadRow('POST …/messages, 1 conversation (row lock: serialized)', one, ratioOne),
          loadRow(`POST …/messages, ${conversations} conversations (${perConversation} conns each)`, many, ratioMany),
          loadRow(`GET …/messages?limit=${listLimit} (of ${listMessages}; ${Math.round(listBytes / 1024)} KiB)`, list, undefined),
          [
            `raw Postgres INSERT (autocommit, ${inserts.concurrency} at a time)`,
            '-',
            fmt(inserts.insertsPerSecond),
            fmt(inserts.latencyMs.p50, 2),
            fmt(inserts.latencyMs.p99, 2),
            fmt(inserts.latencyMs.max, 1),
            fmt(inserts.errors),
            '-',
          ],
        ],
      ),
    );
    out.push(`  Postgres ${inserts.server.version}, synchronous_commit=${inserts.server.synchronousCommit}`);
    out.push('');
    out.push('CPU during the measured runs (% of one core; postgres = the client backends of the bench database; host = % of all cores, every process on it)');
    const names = ['gateway', 'conversations', 'identity', 'postgres', 'load generator'];
    const cpuRow = (name: string, s: LoadSummary) => [name, ...names.map((n) => fmt(s.cpu.processes[n])), fmt(s.cpu.hostBusyPercent)];
    out.push(
      table(
        ['load', ...names, 'host%'],
        [cpuRow('append, 1 conversation', one), cpuRow(`append, ${conversations} conversations`, many), cpuRow(`list ${listLimit}`, list)],
      ),
    );
    // The 1-conversation ratio has no target (appends to one conversation are serialized).
    out.push(`(info) appends/s (1 conversation) ÷ raw Postgres inserts/s: ${fmt(ratioOne, 2)}, no target: appends to one conversation are serialized`);
    return finishBench({ name: 'conversations', lines: out, targets, errors, startedAt: started, at, resultsDir, report });
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch((err: unknown) => progress(`cleanup: ${(err as Error).message}`));
    await rm(dataDir, { recursive: true, force: true });
  }
}

runBench(main);
