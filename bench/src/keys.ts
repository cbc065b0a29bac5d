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
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { createKey, registerUser } from '@switchboard/testkit/gateway-accounts';
import { type CredentialComparison, compareCredentials } from './keys/gateway-account.js';
import { keysPrintout } from './keys/printout.js';
import { compareRpcs, type RpcComparison } from './keys/rpc-comparison.js';
import { callTimeoutMs, concurrency, halfSeconds, maxP99Ms, minRatio, unloadedSeconds } from './keys/settings.js';
import { transports } from './keys/transports.js';
import { inSession, startBenchMesh } from './measure/session.js';
import { benchHeader, check, machineFacts, runBench, type TargetCheck } from './report.js';
import { warmupSeconds } from './scenarios.js';

/** Every call that did not answer as it should, and every gateway request that was not a 2xx. */
function errorsOf(comparisons: RpcComparison[], gateway: CredentialComparison): string[] {
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
  for (const [name, g] of [
    ['jwt', gateway.jwt],
    ['key', gateway.key],
  ] as const) {
    if (g.non2xx + g.errors > 0) errors.push(`gateway with ${name}: ${g.non2xx} non-2xx (${JSON.stringify(g.statusCodes)}), ${g.errors} errors/timeouts`);
  }
  return errors;
}

runBench(() =>
  inSession('keys', async (session) => {
    session.progress('starting the mesh');
    const { mesh } = await startBenchMesh(session);
    const user = await registerUser(mesh.gatewayUrl, 'keys');
    const { fullKey } = await createKey(mesh.gatewayUrl, user.accessToken, 'bench data plane');
    // One token for the whole run: minted tokens live 5 minutes (runtime/src/mesh-token.ts).
    const meshToken = await new MeshTokens(mesh.env.SWITCHBOARD_MESH_SECRET).mint('keys', { caller: 'data-plane' });

    const comparisons: RpcComparison[] = [];
    for (const kind of transports) comparisons.push(await compareRpcs(kind, mesh.urls.keys, meshToken, fullKey, mesh.pid('keys')));
    const gateway = await compareCredentials(mesh, user.accessToken, fullKey);

    const targets: TargetCheck[] = comparisons.flatMap((c) => [
      check(`${c.transport}: AuthorizeKey calls/s ÷ Health/Check calls/s`, c.ratio, '>=', minRatio, 'ratio'),
      check(`${c.transport}: AuthorizeKey p99 (ms)`, c.authorize.latencyMs.p99, '<', maxP99Ms, 'ms'),
    ]);
    const errors = errorsOf(comparisons, gateway);
    const report = {
      at: session.at,
      machine: machineFacts(session.loadAverageAtStart),
      settings: { concurrency, measuredSecondsPerRpc: halfSeconds * 2, halfSeconds, warmupSeconds, unloadedSeconds, callTimeoutMs },
      authorizeKey: comparisons,
      gatewayAccount: { connections: concurrency, jwt: gateway.jwt, key: gateway.key, keyToJwtRatio: gateway.ratio },
      targets,
      errors,
      totalSeconds: 0,
    };
    const header = benchHeader('keys', session.at, report.machine, 'the load generator is this process', false);
    return session.finish({ lines: keysPrintout(header, comparisons, gateway), targets, errors, report });
  }),
);
