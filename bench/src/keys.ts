/**
 * Keys benchmark: the data plane's `switchboard.keys.v1.KeyService/AuthorizeKey` (no estimate:
 * answered from the key states in memory) called from this process, against an empty RPC on the
 * same keys server in the same run, and the gateway's cost of an API key against an access token.
 *
 *   npm run bench:keys     (BENCH_DURATION_SECONDS, default 10: measured seconds per RPC and per
 *                           credential; BENCH_WARMUP_SECONDS, default 2; BENCH_NODE_FLAGS, e.g.
 *                           "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the mesh)
 *
 * 1. For gRPC, Connect binary and Connect JSON (each over one HTTP/2 h2c connection, like a
 *    mesh client), 64 calls in flight: `grpc.health.v1.Health/Check` with service "liveness"
 *    (answered by the process alone: the default service runs `select 1`, which is not an empty
 *    RPC) and AuthorizeKey with a mesh token of the data plane, interleaved Health, AuthorizeKey,
 *    AuthorizeKey, Health, half the duration each, so drift of the host weighs on both alike.
 *    Every AuthorizeKey answer must say allowed; any other answer counts as failed.
 * 2. `GET /v1/account` through the gateway (autocannon, 64 connections) with
 *    `Authorization: Bearer <API key>` and with `Bearer <access token>`, interleaved the same way.
 *
 * Targets, reported PASS/FAIL (never a crash): AuthorizeKey ÷ Health/Check ≥ 0.60 and
 * AuthorizeKey p99 < 5 ms, per transport. Exits non-zero only when a call failed or something
 * crashed. The mesh gets its own database on the Postgres startMesh finds (dropped at the end
 * when it is the local server). Results: printed, and written to bench/results/keys-<time>.json.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConnectError, createClient, type Interceptor, type Transport } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { Health, HealthCheckResponse_ServingStatus } from '@switchboard/contracts/grpc/health/v1/health_pb';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { startMesh } from '@switchboard/runtime/dev/mesh';
import { dropDatabase } from '@switchboard/runtime/infra';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { percentile } from './baselines.js';
import { type LoadResult, runLoad, type Target } from './load.js';
import { type CpuUse, cpuMeter, weightedCpu } from './proc.js';
import { check, finishBench, fmt, machineFacts, runBench, type TargetCheck, table } from './report.js';
import { createKey, durationSeconds, registerUser, warmupSeconds } from './scenarios.js';

const resultsDir = fileURLToPath(new URL('../results/', import.meta.url));
const concurrency = 64;
const minRatio = 0.6;
const maxP99Ms = 5;
/** Each measurement is two halves, interleaved with the other side of the comparison. */
const halfSeconds = Math.max(1, Math.round(durationSeconds / 2));
/** A hard cap on the calls of one half, whatever its duration: loops are bounded in count too. */
const maxCallsPerHalf = 2_000_000;
const callTimeoutMs = 5_000;
/** Seconds of AuthorizeKey one call at a time, per transport: its latency without queueing. */
const unloadedSeconds = 2;

const progress = (message: string) => process.stderr.write(`[bench:keys] ${message}\n`);
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

interface TransportKind {
  name: string;
  /** Which server path answers each RPC (runtime/src/server.ts, fast-unary.ts). */
  path: string;
  make(baseUrl: string, sessionManager: Http2SessionManager, interceptors: Interceptor[]): Transport;
}

const transports: TransportKind[] = [
  {
    name: 'gRPC',
    path: 'both RPCs: connect-node handler',
    make: (baseUrl, sessionManager, interceptors) => createGrpcTransport({ baseUrl, sessionManager, interceptors }),
  },
  {
    name: 'Connect binary',
    path: 'AuthorizeKey: fast unary path; Health/Check: connect-node handler (not on the fast path)',
    make: (baseUrl, sessionManager, interceptors) => createConnectTransport({ baseUrl, httpVersion: '2', useBinaryFormat: true, sessionManager, interceptors }),
  },
  {
    name: 'Connect JSON',
    path: 'both RPCs: connect-node handler',
    make: (baseUrl, sessionManager, interceptors) =>
      createConnectTransport({ baseUrl, httpVersion: '2', useBinaryFormat: false, sessionManager, interceptors }),
  },
];

/** One call: resolves undefined when the answer is the expected one, else what was wrong with it. */
type Call = () => Promise<string | undefined>;

interface Half {
  ok: number;
  failed: number;
  errors: number;
  seconds: number;
  latencies: number[];
  cpu: CpuUse;
  firstProblem?: string;
}

/** `inFlight` loops calling `call` for `seconds`; latencies of the expected answers only. */
async function drive(call: Call, seconds: number, watch: Record<string, Array<number | undefined>>, inFlight = concurrency): Promise<Half> {
  const latencies: number[] = [];
  let ok = 0;
  let failed = 0;
  let errors = 0;
  let issued = 0;
  let firstProblem: string | undefined;
  const stopMeter = cpuMeter(watch);
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const worker = async () => {
    while (issued < maxCallsPerHalf && performance.now() < deadline) {
      issued += 1;
      const callStarted = performance.now();
      try {
        const problem = await call();
        if (problem === undefined) {
          latencies.push(performance.now() - callStarted);
          ok += 1;
        } else {
          failed += 1;
          firstProblem ??= problem;
        }
      } catch (err) {
        errors += 1;
        firstProblem ??= ConnectError.from(err).message;
      }
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const elapsed = (performance.now() - started) / 1000;
  return { ok, failed, errors, seconds: elapsed, latencies, cpu: stopMeter(), firstProblem };
}

interface RpcSummary {
  calls: number;
  seconds: number;
  callsPerSecond: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  failed: number;
  errors: number;
  firstProblem?: string;
  cpu: CpuUse;
  /** CPU the keys process spent per expected answer, in µs. */
  keysCpuMicrosPerCall?: number;
}

function summarize(halves: Half[]): RpcSummary {
  const calls = halves.reduce((sum, half) => sum + half.ok, 0);
  const seconds = halves.reduce((sum, half) => sum + half.seconds, 0);
  const sorted = Float64Array.from(halves.flatMap((half) => half.latencies)).sort();
  const cpu = weightedCpu(halves);
  const callsPerSecond = seconds > 0 ? Math.round(calls / seconds) : 0;
  const keysCpu = cpu.processes.keys;
  return {
    calls,
    seconds: round(seconds),
    callsPerSecond,
    latencyMs: { p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: percentile(sorted, 100) },
    failed: halves.reduce((sum, half) => sum + half.failed, 0),
    errors: halves.reduce((sum, half) => sum + half.errors, 0),
    firstProblem: halves.find((half) => half.firstProblem)?.firstProblem,
    cpu,
    keysCpuMicrosPerCall: keysCpu !== undefined && callsPerSecond > 0 ? Math.round(((keysCpu / 100) * 1e6) / callsPerSecond) : undefined,
  };
}

interface RpcComparison {
  transport: string;
  path: string;
  health: RpcSummary;
  authorize: RpcSummary;
  /** AuthorizeKey calls/s ÷ Health/Check calls/s. */
  ratio: number;
  /** AuthorizeKey one call at a time, after the load: the latency without queueing. */
  authorizeAlone: RpcSummary;
}

async function compareRpcs(kind: TransportKind, keysUrl: string, meshToken: string, fullKey: string, keysPid: number | undefined): Promise<RpcComparison> {
  const sessionManager = new Http2SessionManager(keysUrl);
  const bearer = `Bearer ${meshToken}`;
  // The same header on both RPCs: the health check ignores it, so the two requests weigh the same on the wire.
  const addToken: Interceptor = (next) => (req) => {
    req.header.set('authorization', bearer);
    return next(req);
  };
  const transport = kind.make(keysUrl, sessionManager, [addToken]);
  const health = createClient(Health, transport);
  const keys = createClient(KeyService, transport);
  const checkHealth: Call = async () => {
    const answer = await health.check({ service: 'liveness' }, { timeoutMs: callTimeoutMs });
    return answer.status === HealthCheckResponse_ServingStatus.SERVING ? undefined : `Health/Check status ${HealthCheckResponse_ServingStatus[answer.status]}`;
  };
  const authorize: Call = async () => {
    const answer = await keys.authorizeKey({ fullKey }, { timeoutMs: callTimeoutMs });
    return answer.allowed ? undefined : `AuthorizeKey allowed=false reason=${JSON.stringify(answer.reason)}`;
  };
  try {
    for (const [name, call] of [
      ['Health/Check', checkHealth],
      ['AuthorizeKey', authorize],
    ] as const) {
      const problem = await call().catch((err: unknown) => `${ConnectError.from(err).message}`);
      if (problem) throw new Error(`${kind.name}: the first ${name} call failed: ${problem}`);
    }
    const watch = { keys: [keysPid], 'bench (load generator)': [process.pid] };
    progress(
      `${kind.name}: warm-up ${warmupSeconds / 2} s per RPC, then Health, AuthorizeKey, AuthorizeKey, Health, ${halfSeconds} s each, then AuthorizeKey 1 at a time ${unloadedSeconds} s`,
    );
    if (warmupSeconds > 0) {
      await drive(checkHealth, warmupSeconds / 2, {});
      await drive(authorize, warmupSeconds / 2, {});
    }
    const health1 = await drive(checkHealth, halfSeconds, watch);
    const authorize1 = await drive(authorize, halfSeconds, watch);
    const authorize2 = await drive(authorize, halfSeconds, watch);
    const health2 = await drive(checkHealth, halfSeconds, watch);
    const alone = await drive(authorize, unloadedSeconds, watch, 1);
    const healthSummary = summarize([health1, health2]);
    const authorizeSummary = summarize([authorize1, authorize2]);
    return {
      transport: kind.name,
      path: kind.path,
      health: healthSummary,
      authorize: authorizeSummary,
      ratio: healthSummary.callsPerSecond > 0 ? round(authorizeSummary.callsPerSecond / healthSummary.callsPerSecond, 3) : 0,
      authorizeAlone: summarize([alone]),
    };
  } finally {
    sessionManager.abort();
  }
}

interface GatewaySummary {
  rps: number;
  requests: number;
  /** The worse of the two halves. */
  latencyMs: { p50: number; p99: number };
  non2xx: number;
  errors: number;
  statusCodes: Record<string, number>;
  cpu: CpuUse;
}

function mergeLoads(results: LoadResult[]): GatewaySummary {
  const ok = results.reduce((sum, r) => sum + (r.requests - r.non2xx), 0);
  const seconds = results.reduce((sum, r) => sum + r.durationSeconds, 0);
  const statusCodes: Record<string, number> = {};
  for (const r of results) for (const [code, count] of Object.entries(r.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + count;
  return {
    rps: seconds > 0 ? Math.round(ok / seconds) : 0,
    requests: results.reduce((sum, r) => sum + r.requests, 0),
    latencyMs: { p50: Math.max(...results.map((r) => r.latencyMs.p50)), p99: Math.max(...results.map((r) => r.latencyMs.p99)) },
    non2xx: results.reduce((sum, r) => sum + r.non2xx, 0),
    errors: results.reduce((sum, r) => sum + r.errors + r.timeouts, 0),
    statusCodes,
    cpu: weightedCpu(results.map((r) => ({ cpu: r.cpu, seconds: r.durationSeconds }))),
  };
}

/** One request that must answer 200 before any load is sent. */
async function expectOk(target: Target): Promise<void> {
  const response = await fetch(target.url, { method: target.method ?? 'GET', headers: target.headers, signal: AbortSignal.timeout(10_000) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${target.method ?? 'GET'} ${target.url} answered ${response.status}: ${text.slice(0, 500)}`);
}

const cpuCell = (cpu: CpuUse, name: string) => fmt(cpu.processes[name]);

const gatewayRow = (credential: string, s: GatewaySummary) => [
  credential,
  fmt(s.rps),
  fmt(s.latencyMs.p50, 1),
  fmt(s.latencyMs.p99, 1),
  fmt(s.non2xx),
  fmt(s.errors),
  cpuCell(s.cpu, 'gateway'),
  cpuCell(s.cpu, 'identity'),
  cpuCell(s.cpu, 'keys'),
  fmt(s.cpu.hostBusyPercent),
];

function formatRpcTable(comparisons: RpcComparison[]): string {
  const rows: string[][] = [];
  const row = (transport: string, rpc: string, s: RpcSummary, ratio?: number) => [
    transport,
    rpc,
    fmt(s.callsPerSecond),
    fmt(s.latencyMs.p50, 2),
    fmt(s.latencyMs.p99, 2),
    fmt(s.latencyMs.max, 1),
    fmt(s.failed + s.errors),
    cpuCell(s.cpu, 'keys'),
    fmt(s.keysCpuMicrosPerCall),
    cpuCell(s.cpu, 'bench (load generator)'),
    fmt(s.cpu.hostBusyPercent),
    ratio === undefined ? '-' : ratio.toFixed(2),
  ];
  for (const c of comparisons) {
    rows.push(row(c.transport, 'Health/Check (liveness)', c.health));
    rows.push(row(c.transport, 'AuthorizeKey', c.authorize, c.ratio));
    rows.push(row(c.transport, 'AuthorizeKey, 1 in flight', c.authorizeAlone));
  }
  return table(
    ['transport', 'RPC', 'calls/s', 'p50 ms', 'p99 ms', 'max ms', 'failed', 'keys CPU%', 'keys µs/call', 'bench CPU%', 'host%', '÷ Health'],
    rows,
    2,
  );
}

async function main(): Promise<number> {
  const started = performance.now();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-keys-'));
  const database = `switchboard_bench_keys_${process.pid}_${Date.now().toString(36)}`;
  const at = new Date().toISOString();
  const loadAverageAtStart = os.loadavg().map((l) => round(l));
  progress('starting the mesh');
  // BENCH_NODE_FLAGS: extra flags for every component, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const nodeFlags = process.env.BENCH_NODE_FLAGS?.split(' ').filter(Boolean);
  const mesh = await startMesh({ dataDir, randomPorts: true, database, nodeFlags, env: { LOG_LEVEL: 'warn' } });
  try {
    const user = await registerUser(mesh.gatewayUrl, 'keys');
    const { fullKey } = await createKey(mesh.gatewayUrl, user.accessToken, 'bench data plane');
    // One token for the whole run: minted tokens live 5 minutes (runtime/src/mesh-token.ts).
    const meshToken = await new MeshTokens(mesh.env.SWITCHBOARD_MESH_SECRET).mint('keys', { caller: 'data-plane' });

    const comparisons: RpcComparison[] = [];
    for (const kind of transports) comparisons.push(await compareRpcs(kind, mesh.urls.keys, meshToken, fullKey, mesh.pid('keys')));

    const account = `${mesh.gatewayUrl}/v1/account`;
    const jwtTarget: Target = { url: account, headers: { authorization: `Bearer ${user.accessToken}` } };
    const keyTarget: Target = { url: account, headers: { authorization: `Bearer ${fullKey}` } };
    await expectOk(jwtTarget);
    await expectOk(keyTarget);
    const watch = async () => ({ gateway: [mesh.pid('gateway')], identity: [mesh.pid('identity')], keys: [mesh.pid('keys')] });
    const shape = (warmup: number) => ({ connections: concurrency, durationSeconds: halfSeconds, warmupSeconds: warmup });
    progress(`gateway GET /v1/account: access token, API key (each after ${warmupSeconds} s warm-up), API key, access token, ${halfSeconds} s each`);
    const jwt1 = await runLoad(jwtTarget, shape(warmupSeconds), watch);
    const key1 = await runLoad(keyTarget, shape(warmupSeconds), watch);
    const key2 = await runLoad(keyTarget, shape(0), watch);
    const jwt2 = await runLoad(jwtTarget, shape(0), watch);
    const gateway = { jwt: mergeLoads([jwt1, jwt2]), key: mergeLoads([key1, key2]) };
    const gatewayRatio = gateway.jwt.rps > 0 ? round(gateway.key.rps / gateway.jwt.rps, 3) : 0;

    const targets: TargetCheck[] = comparisons.flatMap((c) => [
      check(`${c.transport}: AuthorizeKey calls/s ÷ Health/Check calls/s`, c.ratio, '>=', minRatio, 'ratio'),
      check(`${c.transport}: AuthorizeKey p99 (ms)`, c.authorize.latencyMs.p99, '<', maxP99Ms, 'ms'),
    ]);
    const errors: string[] = [];
    for (const c of comparisons) {
      for (const [rpc, s] of [
        ['Health/Check', c.health],
        ['AuthorizeKey', c.authorize],
        ['AuthorizeKey 1 in flight', c.authorizeAlone],
      ] as const) {
        if (s.failed + s.errors > 0) errors.push(`${c.transport} ${rpc}: ${s.failed} wrong answers, ${s.errors} errors (first: ${s.firstProblem})`);
      }
    }
    for (const [name, g] of Object.entries(gateway)) {
      if (g.non2xx + g.errors > 0) errors.push(`gateway with ${name}: ${g.non2xx} non-2xx (${JSON.stringify(g.statusCodes)}), ${g.errors} errors/timeouts`);
    }

    const report = {
      at,
      machine: machineFacts(loadAverageAtStart),
      settings: { concurrency, measuredSecondsPerRpc: halfSeconds * 2, halfSeconds, warmupSeconds, unloadedSeconds, callTimeoutMs },
      authorizeKey: comparisons,
      gatewayAccount: { connections: concurrency, jwt: gateway.jwt, key: gateway.key, keyToJwtRatio: gatewayRatio },
      targets,
      errors,
      totalSeconds: 0,
    };

    const out: string[] = [];
    out.push(`Switchboard bench:keys  ${at}`);
    out.push(
      `  node ${process.version}, ${report.machine.cpus} CPU (${report.machine.model}), load avg at start ${loadAverageAtStart.join(' ')}; the load generator is this process, on the same cores`,
    );
    out.push('');
    out.push(
      `AuthorizeKey (no estimate: in memory) vs Health/Check {service: "liveness"} on the keys service, from the bench process, ${concurrency} calls in flight over one h2c connection;`,
    );
    out.push(`${halfSeconds * 2} s measured per RPC per transport, as Health, AuthorizeKey, AuthorizeKey, Health, ${halfSeconds} s each`);
    out.push(formatRpcTable(comparisons));
    for (const c of comparisons) out.push(`    ${c.transport}: ${c.path}`);
    out.push(
      `    At ${concurrency} in flight the mean latency is ${concurrency} ÷ calls/s (Little's law): a p99 under ${maxP99Ms} ms there needs more than ${Math.round((concurrency * 1000) / maxP99Ms)} calls/s;`,
    );
    out.push(`    the "1 in flight" rows (${unloadedSeconds} s, after the load) are the call's own latency, without queueing.`);
    out.push('');
    out.push(
      `GET /v1/account through the gateway, ${concurrency} connections (autocannon): JWT, key, key, JWT, ${halfSeconds} s each; p50/p99: the worse half`,
    );
    out.push(
      table(
        ['credential', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors', 'gateway CPU%', 'identity CPU%', 'keys CPU%', 'host%'],
        [gatewayRow('Bearer <access token> (JWT)', gateway.jwt), gatewayRow('Bearer <API key> (sb_…)', gateway.key)],
      ),
    );
    out.push(`  API key req/s ÷ JWT req/s: ${gatewayRatio.toFixed(2)}`);
    return finishBench({ name: 'keys', lines: out, targets, errors, startedAt: started, at, resultsDir, report });
  } finally {
    await mesh.stop();
    if (!process.env.DATABASE_URL) await dropDatabase(`postgres://postgres@127.0.0.1:5432/${database}`).catch(() => undefined);
    await rm(dataDir, { recursive: true, force: true });
  }
}

runBench(main);
