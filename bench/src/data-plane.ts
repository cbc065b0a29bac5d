/**
 * Data plane benchmark: `POST /v1/chat/completions` through the front door (client → gateway →
 * data plane → AuthorizeKey with an estimate → [RouteModel] → upstream → RecordUsage → client)
 * against the same request sent straight to the upstream, in the same run.
 *
 *   npm run bench:data-plane   (BENCH_DURATION_SECONDS, default 10: measured seconds per target at
 *                               64 in flight; BENCH_WARMUP_SECONDS, default 2; BENCH_LOW_LOAD_SECONDS,
 *                               default 6: measured seconds per target at 1 and at 4 in flight;
 *                               BENCH_NODE_FLAGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to
 *                               profile the mesh)
 *
 * 1. Starts the test upstream (`OpenAiUpstream` of the runtime, 8-token answers) in a child
 *    process of its own (this file with --upstream), so its CPU is measured apart from the load
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
 *    Then 1 in flight with a 40 ms pause after each answer (direct, front door, front door
 *    streaming, 8 s each): back to back, the usage events each request leaves behind (relay, keys
 *    and conversations consumers) run meanwhile; paced, they are done before the next request,
 *    and every hop of the path wakes an idle process.
 *    Then the steps of a front-door request alone, 1 in flight, 3 s each, from this process with
 *    the data plane's kind of client: GET /v1/models on the data plane and through the gateway
 *    (the gateway's hop), AuthorizeKey with an estimate, RecordUsage (passthrough), RouteModel
 *    (fast), and one committed single-row INSERT on the bench database (the commit's floor).
 * 4. CPU per request of each process (/proc/<pid>/stat) over each measured run: the gateway, the
 *    data plane, keys, billing, conversations, the Postgres backends of the bench database, the
 *    nats-server, the upstream and this process (the load generator); and pg_stat_database's
 *    transactions and rows per front-door request (service/fast at 64 and the low-load runs).
 * 5. Checks: every answer is 200 with a complete body (a JSON completion with content; a stream
 *    ending in `data: [DONE]` with no error event; through the front door, a `service` object
 *    with a recorded cost); the upstream got exactly one call per front-door request; after the
 *    load, the key's month-to-date spend and the workspace's balance moved by exactly the sum of
 *    the costs the front door answered.
 *
 * Targets, reported PASS/FAIL (never a crash): front door req/s ÷ direct req/s ≥ 0.5 (at 64 in
 * flight, per variant), and at 1 in flight added p50 < 3 ms and added p99 < 10 ms. Exits non-zero
 * only when a request failed, a check failed or something crashed. Results: printed, and written
 * to bench/results/data-plane-<time>.json.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { RoutingService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { type Component, type Mesh, startMesh } from '@switchboard/runtime/dev/mesh';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { dropDatabase, startNatsServer } from '@switchboard/runtime/infra';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { Money } from '@switchboard/runtime/money';
import pg from 'pg';
import { percentile } from './measure/latency.js';
import { type CpuUse, cpuMeter, readMemory, weightedCpu } from './measure/proc.js';
import { check, finishBench, fmt, machineFacts, runBench, type TargetCheck, table } from './report.js';
import { createKey, durationSeconds, registerUser, warmupSeconds } from './scenarios.js';

const resultsDir = fileURLToPath(new URL('../results/', import.meta.url));
const concurrency = 64;
const lowLoadSeconds = (() => {
  const raw = process.env.BENCH_LOW_LOAD_SECONDS;
  return raw && /^[1-9]\d*$/.test(raw) ? Math.min(Number(raw), 600) : 6;
})();
const lowInFlight = [1, 4] as const;
/** Seconds of each step of a front-door request alone, 1 in flight (where the added latency goes). */
const stageSeconds = 3;
/** The paced run: 1 in flight with this pause after each answer, for this long per target. */
const pacedPauseMs = 40;
const pacedSeconds = 8;
const halfSeconds = Math.max(1, durationSeconds / 2);
const minRatio = 0.5;
const maxAddedP50Ms = 3;
const maxAddedP99Ms = 10;
/** A hard cap on the requests of one run, whatever its duration: loops are bounded in count too. */
const maxRequestsPerRun = 2_000_000;
const requestTimeoutMs = 10_000;
/** Tokens of each answer (the upstream's `words`), and the request's max_tokens. */
const answerTokens = 8;
const topUpUsd = '10.00';
/** How long the keys service may take to show the spend after the last request before the check fails. */
const spendVisibleTimeoutMs = 30_000;

const passthroughModel = 'bench-passthrough';
const fastModels = ['bench-fast-overseas', 'bench-fast-cn'];
const catalogPrice = '0.000001';

const progress = (message: string) => process.stderr.write(`[bench:data-plane] ${message}\n`);
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

// ---------------------------------------------------------------------------------------------
// The upstream, in a child process: `node data-plane.js --upstream` prints its base URL, answers
// "count" on stdin with the calls it got so far, and exits when stdin closes.
// ---------------------------------------------------------------------------------------------

async function upstreamChild(): Promise<void> {
  const upstream = await OpenAiUpstream.start();
  upstream.words = answerTokens;
  let calls = 0;
  // The upstream keeps every request for tests; here only their number matters.
  setInterval(() => {
    calls += upstream.requests.length;
    upstream.requests.length = 0;
  }, 200).unref();
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (line.trim() === 'count') {
      calls += upstream.requests.length;
      upstream.requests.length = 0;
      process.stdout.write(`${JSON.stringify({ calls })}\n`);
    }
  });
  lines.on('close', () => {
    void upstream.close().finally(() => process.exit(0));
  });
  process.stdout.write(`${JSON.stringify({ baseUrl: upstream.baseUrl })}\n`);
}

interface UpstreamProcess {
  baseUrl: string;
  pid: number | undefined;
  calls(): Promise<number>;
  stop(): Promise<void>;
}

async function startUpstreamProcess(nodeFlags: string[]): Promise<UpstreamProcess> {
  const child: ChildProcess = spawn(process.execPath, [...nodeFlags, fileURLToPath(import.meta.url), '--upstream'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  const waiting: Array<(line: string) => void> = [];
  lines.on('line', (line) => waiting.shift()?.(line));
  const nextLine = (timeoutMs: number) =>
    new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the upstream process did not answer')), timeoutMs);
      waiting.push((line) => {
        clearTimeout(timer);
        resolve(line);
      });
    });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const { baseUrl } = JSON.parse(await nextLine(15_000)) as { baseUrl: string };
  return {
    baseUrl,
    pid: child.pid,
    async calls() {
      const answer = nextLine(5_000);
      child.stdin!.write('count\n');
      return (JSON.parse(await answer) as { calls: number }).calls;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.stdin!.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

interface Answer {
  status: number;
  body: string;
}

/** One request over `agent` (a POST when it has a body); the whole answer read (a stream to its end). */
function send(agent: http.Agent, url: URL, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        agent,
        hostname: url.hostname,
        port: url.port,
        path: url.pathname,
        method: body === undefined ? 'GET' : 'POST',
        headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
        timeout: requestTimeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
        res.on('aborted', () => reject(new Error('the response was cut short')));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${requestTimeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

interface Variant {
  name: string;
  through: 'direct' | 'front door';
  model: string;
  stream: boolean;
}

interface Outcome {
  /** undefined when the answer is what it should be. */
  problem?: string;
  /** The front door's `service.cost_usd`. */
  costUsd?: string;
  tier?: string;
}

/** What a complete answer must hold; the cost the front door answered. */
function inspect(variant: Variant, answer: Answer): Outcome {
  if (answer.status !== 200) return { problem: `HTTP ${answer.status}: ${answer.body.slice(0, 300)}` };
  const front = variant.through === 'front door';
  let final: { service?: { cost_usd?: unknown; tier?: unknown }; choices?: Array<{ message?: { content?: unknown } }> };
  if (!variant.stream) {
    try {
      final = JSON.parse(answer.body);
    } catch {
      return { problem: `not JSON: ${answer.body.slice(0, 300)}` };
    }
    if (typeof final.choices?.[0]?.message?.content !== 'string' || final.choices[0].message.content === '')
      return { problem: `no content: ${answer.body.slice(0, 300)}` };
  } else {
    if (!answer.body.endsWith('data: [DONE]\n\n')) return { problem: `the stream did not end with [DONE]: …${answer.body.slice(-300)}` };
    if (answer.body.includes('"error":')) return { problem: `an error event in the stream: …${answer.body.slice(-300)}` };
    const events = answer.body.split('\n\n').filter((event) => event !== '');
    // The events: a role chunk, a chunk per token, the finish chunk, the usage chunk, (front door: the service chunk), [DONE].
    const expected = answerTokens + 4 + (front ? 1 : 0);
    if (events.length !== expected) return { problem: `${events.length} events in the stream, expected ${expected}` };
    if (!front) return {};
    try {
      final = JSON.parse(events[events.length - 2].replace(/^data: /, ''));
    } catch {
      return { problem: `the last chunk is not JSON: ${events[events.length - 2].slice(0, 300)}` };
    }
  }
  if (!front) return {};
  const cost = final.service?.cost_usd;
  if (typeof cost !== 'string') return { problem: `no recorded cost in service: ${JSON.stringify(final.service)}` };
  return { costUsd: cost, tier: typeof final.service?.tier === 'string' ? final.service.tier : undefined };
}

/** Sums what the front door answered it cost, and counts the answers per tier. */
class Ledger {
  private readonly costs = new Map<string, number>();
  readonly tiers: Record<string, number> = {};
  add(outcome: Outcome): void {
    if (outcome.costUsd !== undefined) this.costs.set(outcome.costUsd, (this.costs.get(outcome.costUsd) ?? 0) + 1);
    if (outcome.tier !== undefined) this.tiers[outcome.tier] = (this.tiers[outcome.tier] ?? 0) + 1;
  }
  total(): InstanceType<typeof Money> {
    let sum = new Money(0);
    for (const [cost, count] of this.costs) sum = sum.plus(new Money(cost).mul(count));
    return sum;
  }
}

interface Run {
  variant: string;
  inFlight: number;
  seconds: number;
  ok: number;
  /** Answers that were not a complete 200, by HTTP status ("error" for a failed request). */
  failures: Record<string, number>;
  firstProblem?: string;
  latencies: number[];
  cpu: CpuUse;
}

type Watch = () => Promise<Record<string, Array<number | undefined>>>;

/** One request or call: its status ("200", "error", an RPC's answer) and, once timed, whether it is what it should be. */
type Call = () => Promise<{ status: string; inspect(): Outcome }>;

/** `inFlight` loops making `call` for `seconds` (each waiting `pauseMs` after an answer); latencies of the complete answers only. */
async function drive(name: string, call: Call, ledger: Ledger, seconds: number, inFlight: number, watch?: Watch, pauseMs = 0): Promise<Run> {
  const latencies: number[] = [];
  const failures: Record<string, number> = {};
  let ok = 0;
  let issued = 0;
  let firstProblem: string | undefined;
  const stopMeter = cpuMeter(watch ? await watch() : {});
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const worker = async () => {
    while (issued < maxRequestsPerRun && performance.now() < deadline) {
      issued += 1;
      const callStarted = performance.now();
      let outcome: Outcome;
      let status: string;
      try {
        const answer = await call();
        const elapsed = performance.now() - callStarted;
        status = answer.status;
        outcome = answer.inspect();
        if (!outcome.problem) latencies.push(elapsed);
      } catch (err) {
        outcome = { problem: (err as Error).message };
        status = 'error';
      }
      ledger.add(outcome);
      if (outcome.problem) {
        const key = status === '200' ? '200 incomplete' : status;
        failures[key] = (failures[key] ?? 0) + 1;
        firstProblem ??= `${name}: ${outcome.problem}`;
      } else ok += 1;
      if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const elapsed = (performance.now() - started) / 1000;
  return { variant: name, inFlight, seconds: elapsed, ok, failures, firstProblem, latencies, cpu: stopMeter() };
}

interface Summary {
  variant: string;
  inFlight: number;
  requests: number;
  seconds: number;
  perSecond: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  failures: Record<string, number>;
  failed: number;
  firstProblem?: string;
  cpu: CpuUse;
  /** CPU µs per complete answer, per process. */
  cpuMicrosPerRequest: Record<string, number>;
}

function summarize(runs: Run[]): Summary {
  const ok = runs.reduce((sum, run) => sum + run.ok, 0);
  const seconds = runs.reduce((sum, run) => sum + run.seconds, 0);
  const sorted = Float64Array.from(runs.flatMap((run) => run.latencies)).sort();
  const failures: Record<string, number> = {};
  for (const run of runs) for (const [status, count] of Object.entries(run.failures)) failures[status] = (failures[status] ?? 0) + count;
  const cpu = weightedCpu(runs);
  const perSecond = seconds > 0 ? ok / seconds : 0;
  return {
    variant: runs[0].variant,
    inFlight: runs[0].inFlight,
    requests: ok,
    seconds: round(seconds),
    perSecond: Math.round(perSecond),
    latencyMs: { p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: percentile(sorted, 100) },
    failures,
    failed: Object.values(failures).reduce((sum, count) => sum + count, 0),
    firstProblem: runs.find((run) => run.firstProblem)?.firstProblem,
    cpu,
    cpuMicrosPerRequest: Object.fromEntries(
      Object.entries(cpu.processes).map(([name, percent]) => [name, perSecond > 0 ? Math.round(((percent / 100) * 1e6) / perSecond) : 0]),
    ),
  };
}

// ---------------------------------------------------------------------------------------------
// The mesh's side: catalog, account, balance, processes
// ---------------------------------------------------------------------------------------------

function catalogJson(baseUrl: string): string {
  const model = (id: string, region: string, tiers: string[]) => ({ id, region, tiers, input_usd_per_1m: catalogPrice, output_usd_per_1m: catalogPrice });
  return JSON.stringify(
    {
      regions: {
        overseas: { base_url: baseUrl, api_key_env: 'BENCH_UPSTREAM_KEY' },
        cn: { base_url: baseUrl, api_key_env: 'BENCH_UPSTREAM_KEY' },
      },
      models: [
        model(passthroughModel, 'overseas', []),
        model(fastModels[0], 'overseas', ['fast']),
        model(fastModels[1], 'cn', ['fast']),
        model('bench-balanced', 'overseas', ['balanced']),
      ],
    },
    null,
    2,
  );
}

async function getJson(url: string, token: string): Promise<Record<string, unknown>> {
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(15_000) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

const balanceOf = async (gatewayUrl: string, token: string) => String((await getJson(`${gatewayUrl}/v1/billing/balance`, token)).balance_usd);
const spendOf = async (gatewayUrl: string, token: string, keyId: string) =>
  String((await getJson(`${gatewayUrl}/v1/keys/${keyId}`, token)).month_to_date_spend_usd ?? '0');

/** A top-up through the sandbox checkout, as the README walks through it. */
async function topUp(gatewayUrl: string, token: string, amountUsd: string): Promise<void> {
  const created = await fetch(`${gatewayUrl}/v1/billing/topup`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ amount_usd: amountUsd, idempotency_key: `bench-${randomBytes(6).toString('hex')}` }),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await created.text();
  if (created.status !== 201) throw new Error(`POST /v1/billing/topup answered ${created.status}: ${text.slice(0, 500)}`);
  const checkoutUrl = (JSON.parse(text) as { checkout_url?: string }).checkout_url;
  if (!checkoutUrl) throw new Error(`POST /v1/billing/topup: no checkout_url in ${text.slice(0, 500)}`);
  // The page's Pay button, on this gateway (checkout_url names PUBLIC_BASE_URL's host).
  const paid = await fetch(`${gatewayUrl}${new URL(checkoutUrl).pathname}/complete`, { method: 'POST', signal: AbortSignal.timeout(15_000) });
  const paidText = await paid.text();
  if (paid.status !== 200 || (JSON.parse(paidText) as { status?: string }).status !== 'completed')
    throw new Error(`completing the sandbox checkout answered ${paid.status}: ${paidText.slice(0, 500)}`);
}

/** The Postgres backends serving the bench database, when Postgres runs on this host. */
async function postgresBackends(db: pg.Client, databaseUrl: string): Promise<number[]> {
  if (!['127.0.0.1', 'localhost'].includes(new URL(databaseUrl).hostname)) return [];
  const { rows } = await db.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
  );
  return rows.map((row) => row.pid);
}

/** Transactions and rows written in the bench database so far (pg_stat_database; flushed by idle backends within ~10 s). */
async function databaseActivity(db: pg.Client): Promise<{ transactions: number; inserted: number; updated: number }> {
  const { rows } = await db.query<{ transactions: string; inserted: string; updated: string }>(
    `SELECT (xact_commit + xact_rollback)::text AS transactions, tup_inserted::text AS inserted, tup_updated::text AS updated
       FROM pg_stat_database WHERE datname = current_database()`,
  );
  return { transactions: Number(rows[0].transactions), inserted: Number(rows[0].inserted), updated: Number(rows[0].updated) };
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const started = performance.now();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-data-plane-'));
  const database = `switchboard_bench_data_plane_${process.pid}_${Date.now().toString(36)}`;
  const at = new Date().toISOString();
  const loadAverageAtStart = os.loadavg().map((l) => round(l));
  const cleanups: Array<() => Promise<void>> = [];
  const nodeFlags = process.env.BENCH_NODE_FLAGS?.split(' ').filter(Boolean) ?? [];
  try {
    let natsSetup = 'NATS_URL';
    let natsPid: number | undefined;
    if (!process.env.NATS_URL) {
      try {
        const nats = await startNatsServer(path.join(dataDir, 'nats'));
        cleanups.push(() => nats.stop!());
        process.env.NATS_URL = nats.url;
        natsPid = nats.process.pid;
        natsSetup = 'own nats-server';
      } catch (err) {
        progress(`could not start a nats-server of its own (${(err as Error).message}); using the mesh's discovery`);
        natsSetup = 'discovered by startMesh';
      }
    }
    if (!process.env.DATABASE_URL) cleanups.push(() => dropDatabase(`postgres://postgres@127.0.0.1:5432/${database}`).catch(() => undefined));

    progress('starting the upstream process');
    const upstream = await startUpstreamProcess([]);
    cleanups.push(() => upstream.stop());
    const catalogFile = path.join(dataDir, 'models.json');
    await writeFile(catalogFile, catalogJson(upstream.baseUrl));

    const meshEnv = { LOG_LEVEL: 'warn', SWITCHBOARD_MODELS_FILE: catalogFile, BENCH_UPSTREAM_KEY: 'sk-bench' };
    progress(`starting the mesh (LOG_LEVEL=warn, SWITCHBOARD_MODELS_FILE=<temp catalog → ${upstream.baseUrl}>)`);
    const mesh: Mesh = await startMesh({ dataDir, randomPorts: true, database, nodeFlags, env: meshEnv });
    cleanups.push(() => mesh.stop());
    const meshStartSeconds = round((performance.now() - started) / 1000, 1);

    const user = await registerUser(mesh.gatewayUrl, 'data-plane');
    const balanceAtStart = await balanceOf(mesh.gatewayUrl, user.accessToken);
    await topUp(mesh.gatewayUrl, user.accessToken, topUpUsd);
    const balanceAfterTopUp = await balanceOf(mesh.gatewayUrl, user.accessToken);
    const { keyId, fullKey } = await createKey(mesh.gatewayUrl, user.accessToken, 'bench data plane');
    const spendAtStart = await spendOf(mesh.gatewayUrl, user.accessToken, keyId);
    progress(`workspace balance ${balanceAtStart} → ${balanceAfterTopUp} after the sandbox top-up; key spend ${spendAtStart}`);

    const db = new pg.Client({ connectionString: mesh.env.DATABASE_URL, connectionTimeoutMillis: 3000 });
    await db.connect();
    cleanups.push(() => db.end());

    // One agent per target, the same settings: keep-alive, as many sockets as requests in flight.
    const directAgent = new http.Agent({ keepAlive: true, maxSockets: concurrency, keepAliveMsecs: 1000 });
    const frontAgent = new http.Agent({ keepAlive: true, maxSockets: concurrency, keepAliveMsecs: 1000 });
    cleanups.push(async () => {
      directAgent.destroy();
      frontAgent.destroy();
    });
    const directUrl = new URL(`${upstream.baseUrl}/chat/completions`);
    const frontUrl = new URL(`${mesh.gatewayUrl}/v1/chat/completions`);
    const messages = [{ role: 'user', content: 'Say hello to the benchmark, briefly.' }];
    const bodyOf = (variant: Variant) =>
      JSON.stringify({
        model: variant.model,
        messages,
        max_tokens: answerTokens,
        ...(variant.stream ? { stream: true } : {}),
        // What the data plane adds to every stream it sends upstream: the same upstream work both ways.
        ...(variant.stream && variant.through === 'direct' ? { stream_options: { include_usage: true } } : {}),
      });
    const senderOf = (variant: Variant): Call => {
      const body = bodyOf(variant);
      const sendIt =
        variant.through === 'direct'
          ? () => send(directAgent, directUrl, {}, body)
          : () => send(frontAgent, frontUrl, { authorization: `Bearer ${fullKey}` }, body);
      return async () => {
        const answer = await sendIt();
        return { status: String(answer.status), inspect: () => inspect(variant, answer) };
      };
    };
    const variants = {
      direct: { name: 'direct (upstream)', through: 'direct', model: passthroughModel, stream: false },
      front: { name: `front door, ${passthroughModel}`, through: 'front door', model: passthroughModel, stream: false },
      directStream: { name: 'direct (upstream), stream', through: 'direct', model: passthroughModel, stream: true },
      frontStream: { name: `front door, ${passthroughModel}, stream`, through: 'front door', model: passthroughModel, stream: true },
      fast: { name: 'front door, service/fast', through: 'front door', model: 'service/fast', stream: false },
    } satisfies Record<string, Variant>;

    const ledger = new Ledger();
    const directLedger = new Ledger();
    const ledgerOf = (variant: Variant) => (variant.through === 'direct' ? directLedger : ledger);
    let frontRequestsSent = 0;
    let directRequestsSent = 0;
    const run = async (variant: Variant, seconds: number, inFlight: number, watch?: Watch, pauseMs = 0) => {
      const result = await drive(variant.name, senderOf(variant), ledgerOf(variant), seconds, inFlight, watch, pauseMs);
      const sent = result.ok + Object.values(result.failures).reduce((sum, count) => sum + count, 0);
      if (variant.through === 'direct') directRequestsSent += sent;
      else frontRequestsSent += sent;
      return result;
    };

    // One request of each must be a complete 200 before any load.
    for (const variant of Object.values(variants)) {
      const first = await run(variant, 0.001, 1);
      if (first.ok === 0 || first.firstProblem) throw new Error(`the first request failed: ${first.firstProblem}`);
    }
    const upstreamCallsBefore = await upstream.calls();
    if (upstreamCallsBefore !== directRequestsSent + frontRequestsSent)
      throw new Error(`the upstream got ${upstreamCallsBefore} calls for ${directRequestsSent + frontRequestsSent} requests`);

    const meshPids: Partial<Record<Component, number | undefined>> = {};
    for (const component of ['gateway', 'data-plane', 'keys', 'billing', 'conversations', 'identity', 'webhooks'] as const)
      meshPids[component] = mesh.pid(component);
    const watch: Watch = async () => ({
      gateway: [meshPids.gateway],
      'data-plane': [meshPids['data-plane']],
      keys: [meshPids.keys],
      billing: [meshPids.billing],
      conversations: [meshPids.conversations],
      postgres: await postgresBackends(db, mesh.env.DATABASE_URL),
      'nats-server': [natsPid],
      upstream: [upstream.pid],
      bench: [process.pid],
      'identity+webhooks': [meshPids.identity, meshPids.webhooks],
    });

    // Throughput at 64 in flight: direct, front, front, direct per variant, after a warm-up of each.
    const throughput: Record<string, Summary> = {};
    for (const [direct, front] of [
      [variants.direct, variants.front],
      [variants.directStream, variants.frontStream],
    ] as const) {
      progress(`${concurrency} in flight: warm-up ${warmupSeconds} s each, then ${direct.name} / ${front.name} interleaved, ${halfSeconds} s × 2 each`);
      if (warmupSeconds > 0) {
        await run(direct, warmupSeconds, concurrency);
        await run(front, warmupSeconds, concurrency);
      }
      const d1 = await run(direct, halfSeconds, concurrency, watch);
      const f1 = await run(front, halfSeconds, concurrency, watch);
      const f2 = await run(front, halfSeconds, concurrency, watch);
      const d2 = await run(direct, halfSeconds, concurrency, watch);
      throughput[direct.name] = summarize([d1, d2]);
      throughput[front.name] = summarize([f1, f2]);
    }
    progress(`${concurrency} in flight: ${variants.fast.name}, warm-up ${warmupSeconds} s, then ${durationSeconds} s`);
    if (warmupSeconds > 0) await run(variants.fast, warmupSeconds, concurrency);
    // Every backend's counters of the runs before flushed (idle backends flush within 10 s): the span below is the fast run's and after.
    await new Promise((resolve) => setTimeout(resolve, 10_500));
    const frontActivityBefore = await databaseActivity(db);
    const fastFrontSentBefore = frontRequestsSent;
    throughput[variants.fast.name] = summarize([await run(variants.fast, durationSeconds, concurrency, watch)]);
    const fastFrontSent = frontRequestsSent - fastFrontSentBefore;

    // Low load: 1 and 4 in flight, same interleaving.
    const lowLoad: Record<string, Summary> = {};
    const lowHalf = lowLoadSeconds / 2;
    for (const inFlight of lowInFlight) {
      for (const [direct, front] of [
        [variants.direct, variants.front],
        [variants.directStream, variants.frontStream],
      ] as const) {
        progress(`${inFlight} in flight: ${direct.name} / ${front.name} interleaved, ${lowHalf} s × 2 each`);
        await run(direct, 0.5, inFlight);
        await run(front, 0.5, inFlight);
        const d1 = await run(direct, lowHalf, inFlight, watch);
        const f1 = await run(front, lowHalf, inFlight, watch);
        const f2 = await run(front, lowHalf, inFlight, watch);
        const d2 = await run(direct, lowHalf, inFlight, watch);
        lowLoad[`${inFlight}|${direct.name}`] = summarize([d1, d2]);
        lowLoad[`${inFlight}|${front.name}`] = summarize([f1, f2]);
      }
    }
    progress(`1 in flight: ${variants.fast.name}, ${lowLoadSeconds} s`);
    await run(variants.fast, 0.5, 1);
    lowLoad[`1|${variants.fast.name}`] = summarize([await run(variants.fast, lowLoadSeconds, 1, watch)]);
    // Paced: one request, then a pause, so the work each request leaves behind (the usage event's
    // relay and consumers) is done before the next one; each hop then wakes an idle process.
    progress(`1 in flight, a ${pacedPauseMs} ms pause after each answer: direct, front door, front door streaming, ${pacedSeconds} s each`);
    const paced: Record<string, Summary> = {};
    for (const variant of [variants.direct, variants.front, variants.frontStream]) {
      paced[variant.name] = summarize([await run(variant, pacedSeconds, 1, watch, pacedPauseMs)]);
    }

    // The database's counters of the front-door requests since the fast run, before the steps below write more.
    // pg_stat_database: backends flush their counters at most once a second and, idle, within 10 s.
    progress('waiting for the database counters to flush');
    await new Promise((resolve) => setTimeout(resolve, 10_500));
    const frontActivityAfter = await databaseActivity(db);
    const spanFrontRequests = frontRequestsSent - fastFrontSentBefore;

    // The steps of a front-door request alone, 1 in flight, from this process: where the added latency goes.
    progress(`the steps of a request alone, 1 in flight, ${stageSeconds} s each`);
    const stageAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(async () => stageAgent.destroy());
    const meshTokens = new MeshTokens(mesh.env.SWITCHBOARD_MESH_SECRET);
    const asDataPlane = { caller: 'data-plane' };
    const keysClient = createPeerClient(KeyService, { name: 'keys', url: mesh.urls.keys }, meshTokens, asDataPlane);
    const usageClient = createPeerClient(UsageService, { name: 'billing', url: mesh.urls.billing }, meshTokens, asDataPlane);
    const routingClient = createPeerClient(RoutingService, { name: 'conversations', url: mesh.urls.conversations }, meshTokens, asDataPlane);
    const models = (base: string): Call => {
      const url = new URL(`${base}/v1/models`);
      return async () => {
        const answer = await send(stageAgent, url, { authorization: `Bearer ${fullKey}` });
        return {
          status: String(answer.status),
          inspect: () =>
            answer.status === 200 && answer.body.includes(passthroughModel) ? {} : { problem: `HTTP ${answer.status}: ${answer.body.slice(0, 300)}` },
        };
      };
    };
    const runId = randomBytes(4).toString('hex');
    let generations = 0;
    await db.query('CREATE TABLE IF NOT EXISTS bench_commit_probe (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())');
    const stageCalls: Array<[string, Call]> = [
      ['GET /v1/models on the data plane (AuthorizeKey without estimate inside)', models(mesh.env.DATA_PLANE_URL)],
      ['GET /v1/models through the gateway', models(mesh.gatewayUrl)],
      [
        'AuthorizeKey with an estimate (keys; the key has no cap: from memory)',
        async () => {
          const answer = await keysClient.authorizeKey({ fullKey, estimatedCostUsd: '0.000000000096' }, { timeoutMs: requestTimeoutMs });
          return { status: answer.allowed ? '200' : answer.reason, inspect: () => (answer.allowed ? {} : { problem: `refused: ${answer.reason}` }) };
        },
      ],
      [
        'RecordUsage, passthrough (billing: a debit and its outbox row)',
        async () => {
          const answer = await usageClient.recordUsage(
            {
              generationId: `gen_bench_${runId}_${generations++}`,
              keyId,
              workspaceId: user.workspaceId,
              model: passthroughModel,
              inputTokens: 9n,
              outputTokens: BigInt(answerTokens),
              upstreamCostUsd: '0.000000000017',
            },
            { timeoutMs: requestTimeoutMs },
          );
          return { status: '200', inspect: () => (answer.duplicate ? { problem: 'duplicate' } : { costUsd: answer.costUsd }) };
        },
      ],
      [
        'RouteModel fast (conversations)',
        async () => {
          const answer = await routingClient.routeModel({ tier: 'fast', routingPolicy: 'any' }, { timeoutMs: requestTimeoutMs });
          return { status: '200', inspect: () => (fastModels.includes(answer.model) ? {} : { problem: `routed to ${answer.model}` }) };
        },
      ],
      [
        'Postgres: one single-row INSERT committed (the bench database)',
        async () => {
          await db.query('INSERT INTO bench_commit_probe DEFAULT VALUES');
          return { status: '200', inspect: () => ({}) };
        },
      ],
    ];
    const stages: Record<string, Summary> = {};
    for (const [name, call] of stageCalls) {
      await drive(name, call, ledger, 0.3, 1);
      stages[name] = summarize([await drive(name, call, ledger, stageSeconds, 1, watch)]);
    }
    await db.query('DROP TABLE IF EXISTS bench_commit_probe');

    // After the load: the upstream's calls, the database's counters of the fast run, the spend and the balance.
    const upstreamCalls = await upstream.calls();
    const requestsSent = directRequestsSent + frontRequestsSent;
    progress('waiting for the key spend to show every answered cost');
    const answered = ledger.total();
    const expectedBalance = new Money(balanceAfterTopUp).minus(answered);
    let spendAtEnd = await spendOf(mesh.gatewayUrl, user.accessToken, keyId);
    const spendDeadline = performance.now() + spendVisibleTimeoutMs;
    while (!new Money(spendAtEnd).minus(spendAtStart).eq(answered) && performance.now() < spendDeadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      spendAtEnd = await spendOf(mesh.gatewayUrl, user.accessToken, keyId);
    }
    const balanceAtEnd = await balanceOf(mesh.gatewayUrl, user.accessToken);
    // The counters span the fast run and the low-load runs after it: per front-door request of that span.
    const postgresPerFrontRequest = {
      span: `service/fast at ${concurrency} in flight and the low-load runs after it: ${spanFrontRequests} front-door requests; direct requests touch no database`,
      transactions: round((frontActivityAfter.transactions - frontActivityBefore.transactions) / spanFrontRequests, 2),
      inserted: round((frontActivityAfter.inserted - frontActivityBefore.inserted) / spanFrontRequests, 2),
      updated: round((frontActivityAfter.updated - frontActivityBefore.updated) / spanFrontRequests, 2),
    };

    // Checks.
    const errors: string[] = [];
    for (const summary of [...Object.values(throughput), ...Object.values(lowLoad), ...Object.values(paced), ...Object.values(stages)]) {
      if (summary.failed > 0)
        errors.push(
          `${summary.variant}, ${summary.inFlight} in flight: ${summary.failed} requests failed ${JSON.stringify(summary.failures)} (first: ${summary.firstProblem})`,
        );
    }
    if (upstreamCalls !== requestsSent)
      errors.push(`the upstream got ${upstreamCalls} calls for ${requestsSent} requests sent (${directRequestsSent} direct, ${frontRequestsSent} front door)`);
    const spendMoved = new Money(spendAtEnd).minus(spendAtStart);
    if (!spendMoved.eq(answered))
      errors.push(`the key's spend moved by ${spendMoved.toFixed()} USD, the front door answered costs summing to ${answered.toFixed()} USD`);
    if (!new Money(balanceAtEnd).eq(expectedBalance))
      errors.push(
        `the workspace balance is ${balanceAtEnd} USD, expected ${expectedBalance.toFixed()} (after the top-up ${balanceAfterTopUp} − answered costs ${answered.toFixed()})`,
      );
    const fastTiers = ledger.tiers.fast ?? 0;
    if (fastTiers === 0) errors.push('no service/fast answer said tier "fast"');
    for (const component of ['gateway', 'data-plane', 'keys', 'billing', 'conversations'] as const) {
      if (!readMemory(mesh.pid(component))) errors.push(`${component} exited during the bench:\n${mesh.output(component).split('\n').slice(-20).join('\n')}`);
    }
    const warnings = (['data-plane', 'gateway', 'keys', 'billing', 'conversations'] as const).flatMap((component) =>
      mesh
        .output(component)
        .split('\n')
        .filter((line) => line.includes('"level":40') || line.includes('"level":50') || line.includes('"level":60'))
        .slice(0, 3)
        .map((line) => `${component}: ${line.slice(0, 300)}`),
    );

    const ratioOf = (front: Summary, direct: Summary) => (direct.perSecond > 0 ? round(front.perSecond / direct.perSecond, 3) : 0);
    const ratios = {
      nonStreaming: ratioOf(throughput[variants.front.name], throughput[variants.direct.name]),
      streaming: ratioOf(throughput[variants.frontStream.name], throughput[variants.directStream.name]),
      fastNonStreaming: ratioOf(throughput[variants.fast.name], throughput[variants.direct.name]),
    };
    const added = (inFlight: number, front: Variant, direct: Variant) => {
      const f = lowLoad[`${inFlight}|${front.name}`];
      const d = lowLoad[`${inFlight}|${direct.name}`];
      return { p50: round(f.latencyMs.p50 - d.latencyMs.p50), p99: round(f.latencyMs.p99 - d.latencyMs.p99) };
    };
    const addedLatency: Record<string, { p50: number; p99: number }> = {};
    for (const inFlight of lowInFlight) {
      addedLatency[`${inFlight} in flight, non-streaming`] = added(inFlight, variants.front, variants.direct);
      addedLatency[`${inFlight} in flight, streaming`] = added(inFlight, variants.frontStream, variants.directStream);
    }
    addedLatency['1 in flight, service/fast non-streaming'] = added(1, variants.fast, variants.direct);
    const at64 = (front: Summary, direct: Summary) => ({
      p50: round(front.latencyMs.p50 - direct.latencyMs.p50),
      p99: round(front.latencyMs.p99 - direct.latencyMs.p99),
    });

    const targets: TargetCheck[] = [
      check(`front door req/s ÷ direct req/s, non-streaming, ${concurrency} in flight`, ratios.nonStreaming, '>=', minRatio, 'ratio'),
      check(`front door req/s ÷ direct req/s, streaming, ${concurrency} in flight`, ratios.streaming, '>=', minRatio, 'ratio'),
      check(`front door (service/fast) req/s ÷ direct req/s, non-streaming, ${concurrency} in flight`, ratios.fastNonStreaming, '>=', minRatio, 'ratio'),
      check('added p50 (ms), 1 in flight, non-streaming', addedLatency['1 in flight, non-streaming'].p50, '<', maxAddedP50Ms, 'ms'),
      check('added p99 (ms), 1 in flight, non-streaming', addedLatency['1 in flight, non-streaming'].p99, '<', maxAddedP99Ms, 'ms'),
      check('added p50 (ms), 1 in flight, streaming', addedLatency['1 in flight, streaming'].p50, '<', maxAddedP50Ms, 'ms'),
      check('added p99 (ms), 1 in flight, streaming', addedLatency['1 in flight, streaming'].p99, '<', maxAddedP99Ms, 'ms'),
    ];

    const report = {
      at,
      machine: machineFacts(loadAverageAtStart),
      settings: {
        concurrency,
        durationSeconds,
        halfSeconds,
        warmupSeconds,
        lowLoadSeconds,
        lowInFlight,
        requestTimeoutMs,
        answerTokens,
        client: 'node:http Agent, keepAlive, maxSockets 64, one per target',
        upstream: 'OpenAiUpstream (runtime/src/dev/openai-upstream.ts) in a child process',
        mesh: { ...meshEnv, SWITCHBOARD_MODELS_FILE: '<temp catalog>' },
        nats: natsSetup,
        catalogPricePer1m: catalogPrice,
      },
      meshStartSeconds,
      throughput,
      ratios,
      lowLoad,
      addedLatencyMs: addedLatency,
      paced: { pauseMs: pacedPauseMs, runs: paced },
      stages,
      postgresPerFrontRequest,
      billing: {
        balanceAtStart,
        topUpUsd,
        balanceAfterTopUp,
        balanceAtEnd,
        frontDoorCostsAnswered: answered.toFixed(),
        keySpendAtStart: spendAtStart,
        keySpendAtEnd: spendAtEnd,
        tiers: ledger.tiers,
      },
      requests: { direct: directRequestsSent, frontDoor: frontRequestsSent, upstreamCalls, fastRunFrontDoor: fastFrontSent },
      warnings,
      targets,
      errors,
      totalSeconds: 0,
    };

    // The printout.
    const out: string[] = [];
    out.push(`Switchboard bench:data-plane  ${at}`);
    out.push(
      `  node ${process.version}, ${report.machine.cpus} CPU (${report.machine.model}), load avg at start ${loadAverageAtStart.join(' ')}, at end ${report.machine.loadAverageAtEnd.join(' ')}; the load generator is this process and the upstream its child, on the same cores`,
    );
    out.push(
      `  POST /v1/chat/completions, ${answerTokens}-token answers (max_tokens ${answerTokens}); keep-alive http.Agent per target; upstream: OpenAiUpstream in its own process`,
    );
    out.push('');
    const names = ['gateway', 'data-plane', 'keys', 'billing', 'conversations', 'postgres', 'nats-server', 'upstream', 'bench'];
    const latencyRow = (s: Summary, ratio?: number) => [
      s.variant,
      fmt(s.perSecond),
      fmt(s.latencyMs.p50, 2),
      fmt(s.latencyMs.p99, 2),
      fmt(s.latencyMs.max, 1),
      fmt(s.failed),
      ratio === undefined ? '-' : ratio.toFixed(2),
    ];
    out.push(`Throughput, ${concurrency} requests in flight (${durationSeconds} s measured per target; direct/front interleaved in halves)`);
    out.push(
      table(
        ['target', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'failed', 'front ÷ direct'],
        [
          latencyRow(throughput[variants.direct.name]),
          latencyRow(throughput[variants.front.name], ratios.nonStreaming),
          latencyRow(throughput[variants.fast.name], ratios.fastNonStreaming),
          latencyRow(throughput[variants.directStream.name]),
          latencyRow(throughput[variants.frontStream.name], ratios.streaming),
        ],
      ),
    );
    out.push(
      `    at ${concurrency} in flight, front − direct: non-streaming p50 +${at64(throughput[variants.front.name], throughput[variants.direct.name]).p50} ms, p99 +${at64(throughput[variants.front.name], throughput[variants.direct.name]).p99} ms (queueing: mean latency = ${concurrency} ÷ req/s)`,
    );
    out.push('');
    out.push(`Latency at low load (${lowLoadSeconds} s measured per target, interleaved in halves)`);
    const lowRows: string[][] = [];
    for (const inFlight of lowInFlight) {
      for (const [direct, front] of [
        [variants.direct, variants.front],
        [variants.directStream, variants.frontStream],
      ] as const) {
        const d = lowLoad[`${inFlight}|${direct.name}`];
        lowRows.push(comparisonRow(`${inFlight} in flight, ${front.stream ? 'streaming' : 'non-streaming'}`, d, lowLoad[`${inFlight}|${front.name}`]));
      }
    }
    lowRows.push(comparisonRow('1 in flight, service/fast (vs direct above)', lowLoad[`1|${variants.direct.name}`], lowLoad[`1|${variants.fast.name}`], false));
    out.push(table(['run', 'direct req/s', 'direct p50', 'direct p99', 'front req/s', 'front p50', 'front p99', 'added p50', 'added p99', 'failed'], lowRows));
    {
      const d = paced[variants.direct.name];
      const rows = [variants.front, variants.frontStream].map((variant) =>
        comparisonRow(
          `1 in flight, ${pacedPauseMs} ms pause after each, ${variant.stream ? 'streaming' : 'non-streaming'} (direct: non-streaming)`,
          d,
          paced[variant.name],
        ),
      );
      out.push(
        `  Paced (${pacedSeconds} s per target; the asynchronous work a request leaves behind is done before the next one, and every hop wakes an idle process):`,
      );
      out.push(table(['run', 'direct req/s', 'direct p50', 'direct p99', 'front req/s', 'front p50', 'front p99', 'added p50', 'added p99', 'failed'], rows));
    }
    out.push('');
    out.push(
      `The steps of a front-door request alone, 1 in flight, ${stageSeconds} s each, from this process (the data plane's clients: Connect binary over h2c)`,
    );
    out.push(
      table(
        ['step', 'calls/s', 'p50 ms', 'p99 ms', 'max ms', 'failed'],
        Object.values(stages).map((st) => [
          st.variant,
          fmt(st.perSecond),
          fmt(st.latencyMs.p50, 2),
          fmt(st.latencyMs.p99, 2),
          fmt(st.latencyMs.max, 1),
          fmt(st.failed),
        ]),
      ),
    );
    out.push('');
    out.push(
      'CPU per request (µs of CPU per complete answer, per process; postgres = the backends of the bench database; host% = all cores, every process on it; other = host CPU not in the columns, % of one core)',
    );
    const cpuRow = (label: string, s: Summary) => {
      const ours = Object.values(s.cpu.processes).reduce((sum, percent) => sum + percent, 0);
      const other = Math.max(0, Math.round(s.cpu.hostBusyPercent * report.machine.cpus) - ours);
      const meshTotal = ['gateway', 'data-plane', 'keys', 'billing', 'conversations', 'postgres', 'nats-server'].reduce(
        (sum, name) => sum + (s.cpuMicrosPerRequest[name] ?? 0),
        0,
      );
      return [label, fmt(s.perSecond), ...names.map((name) => fmt(s.cpuMicrosPerRequest[name])), fmt(meshTotal), fmt(s.cpu.hostBusyPercent), fmt(other)];
    };
    const cpuRows: string[][] = [
      cpuRow(`${concurrency}: ${variants.direct.name}`, throughput[variants.direct.name]),
      cpuRow(`${concurrency}: ${variants.front.name}`, throughput[variants.front.name]),
      cpuRow(`${concurrency}: ${variants.fast.name}`, throughput[variants.fast.name]),
      cpuRow(`${concurrency}: ${variants.directStream.name}`, throughput[variants.directStream.name]),
      cpuRow(`${concurrency}: ${variants.frontStream.name}`, throughput[variants.frontStream.name]),
      cpuRow(`1: ${variants.direct.name}`, lowLoad[`1|${variants.direct.name}`]),
      cpuRow(`1: ${variants.front.name}`, lowLoad[`1|${variants.front.name}`]),
      cpuRow(`1: ${variants.fast.name}`, lowLoad[`1|${variants.fast.name}`]),
      ...Object.values(stages).map((st) => cpuRow(`1: step: ${st.variant.split(' (')[0]}`, st)),
    ];
    out.push(table(['run (in flight: target)', 'req/s', ...names, 'mesh total', 'host%', 'other%'], cpuRows));
    out.push('  CPU % of one core during the same runs:');
    for (const [label, s] of [
      [`${concurrency}: ${variants.front.name}`, throughput[variants.front.name]],
      [`${concurrency}: ${variants.fast.name}`, throughput[variants.fast.name]],
      [`${concurrency}: ${variants.frontStream.name}`, throughput[variants.frontStream.name]],
      [`${concurrency}: ${variants.direct.name}`, throughput[variants.direct.name]],
    ] as const) {
      out.push(
        `    ${label}: ${Object.entries(s.cpu.processes)
          .map(([name, percent]) => `${name} ${percent}%`)
          .join(', ')}; host ${s.cpu.hostBusyPercent}% of ${report.machine.cpus} cores`,
      );
    }
    out.push(
      `  Postgres per front-door request (pg_stat_database over ${postgresPerFrontRequest.span}; idle pollers included): ${postgresPerFrontRequest.transactions} transactions, ${postgresPerFrontRequest.inserted} rows inserted, ${postgresPerFrontRequest.updated} updated`,
    );
    out.push('');
    out.push(
      `Billing: workspace balance ${balanceAtStart} at sign-up, ${balanceAfterTopUp} after the ${topUpUsd} sandbox top-up, ${balanceAtEnd} at the end; the front door answered costs summing to ${answered.toFixed()} USD for ${frontRequestsSent} requests (tiers ${JSON.stringify(ledger.tiers)}); the key's month-to-date spend ${spendAtStart} → ${spendAtEnd}`,
    );
    out.push(
      `Requests: ${directRequestsSent} direct, ${frontRequestsSent} through the front door; the upstream got ${upstreamCalls} calls (warm-ups and first requests included)`,
    );
    if (warnings.length) out.push('', 'Warnings and errors the mesh logged (first 3 per component):', ...warnings.map((line) => `  ${line}`));
    return finishBench({ name: 'data-plane', lines: out, targets, errors, startedAt: started, at, resultsDir, report });
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch((err: unknown) => progress(`cleanup: ${(err as Error).message}`));
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--upstream') {
  upstreamChild().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
} else {
  runBench(main);
}

/** One row of a latency comparison: direct and front door, and what the front door adds (front − direct). */
function comparisonRow(label: string, direct: Summary, front: Summary, countDirectFailures = true): string[] {
  return [
    label,
    fmt(direct.perSecond),
    fmt(direct.latencyMs.p50, 2),
    fmt(direct.latencyMs.p99, 2),
    fmt(front.perSecond),
    fmt(front.latencyMs.p50, 2),
    fmt(front.latencyMs.p99, 2),
    `+${(front.latencyMs.p50 - direct.latencyMs.p50).toFixed(2)}`,
    `+${(front.latencyMs.p99 - direct.latencyMs.p99).toFixed(2)}`,
    fmt(front.failed + (countDirectFailures ? direct.failed : 0)),
  ];
}
