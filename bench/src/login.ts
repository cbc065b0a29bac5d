/**
 * Login benchmark (issue 3): sign-in throughput through the gateway (argon2id verification in
 * identity) against the raw argon2id verification rate measured on this machine in the same run,
 * and proof that identity's event loop is not blocked while it hashes: a health check sent to
 * identity every 20 ms during the load must stay under 50 ms at p99.
 *
 *   npm run bench:login        (BENCH_DURATION_SECONDS, default 10; BENCH_LOGIN_CONNECTIONS, default 8;
 *                               BENCH_NODE_FLAGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile)
 *
 * The mesh gets its own database on the Postgres startMesh finds (dropped at the end when it is
 * the local server). Results: printed, and written to bench/results/login-<time>.json.
 */
import os from 'node:os';
import path from 'node:path';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { registerUserWithPassword } from '@switchboard/testkit/gateway-accounts';
import { argon2Parameters, rawVerifyRate } from './login/argon2-rate.js';
import { probeHealth } from './login/health-probe.js';
import { percentileOf, round } from './measure/latency.js';
import { runLoad } from './measure/load.js';
import { sleep } from './measure/loop.js';
import { inSession, startBenchMesh } from './measure/session.js';
import { envWholeNumber } from './measure/settings.js';
import { runBench, writeResultFile } from './report.js';

const durationSeconds = envWholeNumber('BENCH_DURATION_SECONDS', 10);
const connections = envWholeNumber('BENCH_LOGIN_CONNECTIONS', 8);
const probeIntervalMs = 20;
const maxHealthP99Ms = 50;

/** POST /v1/auth/login of a fresh user, checked to answer 200 once. */
async function loginTarget(mesh: Mesh) {
  const user = await registerUserWithPassword(mesh.gatewayUrl, 'login');
  const target = {
    url: `${mesh.gatewayUrl}/v1/auth/login`,
    method: 'POST' as const,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: user.email, password: user.password }),
  };
  const check = await fetch(target.url, { method: 'POST', headers: target.headers, body: target.body });
  if (check.status !== 200) throw new Error(`login answered ${check.status}: ${await check.text()}`);
  return target;
}

/** The login load with identity's health probed meanwhile, and the probe's latencies with the mesh idle just before. */
async function loginUnderProbe(mesh: Mesh, target: Awaited<ReturnType<typeof loginTarget>>) {
  console.log(`login load (${durationSeconds} s, ${connections} connections) with a health probe every ${probeIntervalMs} ms`);
  const idleProbe = probeHealth(mesh.urls.identity, probeIntervalMs);
  await sleep(2000);
  const idle = await idleProbe.stop();
  const probe = probeHealth(mesh.urls.identity, probeIntervalMs);
  const load = await runLoad(target, { connections, durationSeconds, warmupSeconds: 2 });
  const health = await probe.stop();
  return { idle, load, health };
}

runBench(() =>
  inSession('login', async (session) => {
    console.log('starting the mesh');
    const { mesh } = await startBenchMesh(session);
    const target = await loginTarget(mesh);

    console.log(`raw argon2id verify rate (${durationSeconds} s each: 4 at a time, then 1 at a time; mesh idle)`);
    const raw = await rawVerifyRate(durationSeconds * 1000, 4);
    const rawSingle = await rawVerifyRate(durationSeconds * 1000, 1);
    const { idle, load, health } = await loginUnderProbe(mesh, target);

    const sorted = [...health.latencies].sort((a, b) => a - b);
    const report = {
      at: new Date().toISOString(),
      machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
      argon2: { ...argon2Parameters, type: 'argon2id' },
      rawVerifyPerSecond: round(raw, 1),
      rawVerifyPerSecondOneAtATime: round(rawSingle, 1),
      login: { connections, rps: load.rps, latencyMs: load.latencyMs, non2xx: load.non2xx, errors: load.errors, statusCodes: load.statusCodes },
      loginToRawRatio: round(load.rps / raw, 2),
      identityHealthDuringLoad: {
        samples: health.latencies.length,
        failures: health.failures,
        p50Ms: round(percentileOf(sorted, 50), 1),
        p99Ms: round(percentileOf(sorted, 99), 1),
        maxMs: round(Math.max(...health.latencies), 1),
      },
      identityHealthIdle: {
        samples: idle.latencies.length,
        p99Ms: round(
          percentileOf(
            [...idle.latencies].sort((a, b) => a - b),
            99,
          ),
          1,
        ),
      },
    };
    const healthOk = report.identityHealthDuringLoad.p99Ms < maxHealthP99Ms && health.failures === 0;
    console.log(JSON.stringify(report, null, 2));
    console.log(
      `\nlogin ${load.rps}/s vs raw argon2id verify ${report.rawVerifyPerSecond}/s 4 at a time (ratio ${report.loginToRawRatio}), ${report.rawVerifyPerSecondOneAtATime}/s 1 at a time`,
    );
    console.log(
      `identity health check during the load: p99 ${report.identityHealthDuringLoad.p99Ms} ms (${healthOk ? 'PASS' : 'FAIL'}: < ${maxHealthP99Ms} ms)`,
    );
    const file = await writeResultFile('login', report.at, report);
    console.log(`wrote ${path.relative(process.cwd(), file)}`);
    return healthOk && load.non2xx === 0 ? 0 : 1;
  }),
);
