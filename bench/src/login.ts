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
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startMesh } from '@switchboard/runtime/dev/mesh';
import { dropDatabase } from '@switchboard/runtime/infra';
import argon2 from 'argon2';
import { runLoad } from './load.js';
import { registerUserWithPassword } from './scenarios.js';

const resultsDir = fileURLToPath(new URL('../results/', import.meta.url));
/** The parameters identity uses (services/identity/src/passwords.ts). */
const argon2Parameters = { type: argon2.argon2id, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;

const seconds = (name: string, fallback: number) => {
  const raw = process.env[name];
  return raw && /^\d+$/.test(raw) ? Number(raw) : fallback;
};

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

const round = (value: number, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits;

/** argon2id verifications per second in this process, `concurrency` at a time (libuv's 4 threads, like identity). */
async function rawVerifyRate(durationMs: number, concurrency: number): Promise<number> {
  const hash = await argon2.hash('bench password for the raw rate', argon2Parameters);
  let done = 0;
  const deadline = performance.now() + durationMs;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        await argon2.verify(hash, 'bench password for the raw rate');
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

/** Health checks of identity every `intervalMs` until stopped; returns their latencies. */
function probeHealth(identityUrl: string, intervalMs: number): { stop(): Promise<{ latencies: number[]; failures: number }> } {
  const latencies: number[] = [];
  let failures = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      try {
        const response = await fetch(`${identityUrl}/grpc.health.v1.Health/Check`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"service":"liveness"}',
          signal: AbortSignal.timeout(5000),
        });
        await response.text();
        if (response.ok) latencies.push(performance.now() - started);
        else failures++;
      } catch {
        failures++;
      }
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { latencies, failures };
    },
  };
}

async function main(): Promise<number> {
  const durationSeconds = seconds('BENCH_DURATION_SECONDS', 10);
  const connections = seconds('BENCH_LOGIN_CONNECTIONS', 8);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-login-'));
  const database = `switchboard_bench_login_${process.pid}_${Date.now().toString(36)}`;
  console.log('starting the mesh');
  // BENCH_NODE_FLAGS: extra flags for every component, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const nodeFlags = process.env.BENCH_NODE_FLAGS?.split(' ').filter(Boolean);
  const mesh = await startMesh({ dataDir, randomPorts: true, database, nodeFlags, env: { LOG_LEVEL: 'warn' } });
  try {
    const user = await registerUserWithPassword(mesh.gatewayUrl, 'login');
    const target = {
      url: `${mesh.gatewayUrl}/v1/auth/login`,
      method: 'POST' as const,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: user.email, password: user.password }),
    };
    const check = await fetch(target.url, { method: 'POST', headers: target.headers, body: target.body });
    if (check.status !== 200) throw new Error(`login answered ${check.status}: ${await check.text()}`);

    console.log(`raw argon2id verify rate (${durationSeconds} s each: 4 at a time, then 1 at a time; mesh idle)`);
    const raw = await rawVerifyRate(durationSeconds * 1000, 4);
    const rawSingle = await rawVerifyRate(durationSeconds * 1000, 1);

    console.log(`login load (${durationSeconds} s, ${connections} connections) with a health probe every 20 ms`);
    const idleProbe = probeHealth(mesh.urls.identity, 20);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const idle = await idleProbe.stop();
    const probe = probeHealth(mesh.urls.identity, 20);
    const load = await runLoad(target, { connections, durationSeconds, warmupSeconds: 2 });
    const health = await probe.stop();

    const report = {
      at: new Date().toISOString(),
      machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
      argon2: { ...argon2Parameters, type: 'argon2id' },
      rawVerifyPerSecond: round(raw),
      rawVerifyPerSecondOneAtATime: round(rawSingle),
      login: { connections, rps: load.rps, latencyMs: load.latencyMs, non2xx: load.non2xx, errors: load.errors, statusCodes: load.statusCodes },
      loginToRawRatio: round(load.rps / raw, 2),
      identityHealthDuringLoad: {
        samples: health.latencies.length,
        failures: health.failures,
        p50Ms: round(percentile(health.latencies, 50)),
        p99Ms: round(percentile(health.latencies, 99)),
        maxMs: round(Math.max(...health.latencies)),
      },
      identityHealthIdle: { samples: idle.latencies.length, p99Ms: round(percentile(idle.latencies, 99)) },
    };
    const healthOk = report.identityHealthDuringLoad.p99Ms < 50 && health.failures === 0;
    console.log(JSON.stringify(report, null, 2));
    console.log(
      `\nlogin ${load.rps}/s vs raw argon2id verify ${report.rawVerifyPerSecond}/s 4 at a time (ratio ${report.loginToRawRatio}), ${report.rawVerifyPerSecondOneAtATime}/s 1 at a time`,
    );
    console.log(`identity health check during the load: p99 ${report.identityHealthDuringLoad.p99Ms} ms (${healthOk ? 'PASS' : 'FAIL'}: < 50 ms)`);
    await mkdir(resultsDir, { recursive: true });
    const file = path.join(resultsDir, `login-${report.at.replace(/[:.]/g, '-')}.json`);
    await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
    console.log(`wrote ${path.relative(process.cwd(), file)}`);
    return healthOk && load.non2xx === 0 ? 0 : 1;
  } finally {
    await mesh.stop();
    if (!process.env.DATABASE_URL) await dropDatabase(`postgres://postgres@127.0.0.1:5432/${database}`).catch(() => undefined);
    await rm(dataDir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
