/**
 * Gateway edge benchmark: what the REST surface's rate limits and Idempotency-Key cost a request
 * (gateway/src/rate-limits.ts, gateway/src/idempotency.ts; docs/conventions.md#rate-limits and
 * #idempotency), measured in this process on the real code.
 *
 *   npm run bench:gateway-edge   (NATS_URL, default nats://127.0.0.1:4222; BENCH_REQUESTS,
 *                                 default 2000: Idempotency-Key requests of each kind)
 *
 * 1. Rate limits: RateLimiter.take on a real http.ServerResponse (counting, both headers set),
 *    spread over 10 000 principals and 10 000 addresses: CPU per request.
 * 2. Idempotency-Key on the NATS at NATS_URL, one request at a time: a first request (claim,
 *    seal, keep: three KV round trips) and a replay (create refused, get, open): this process's
 *    CPU per request and the wall latency the header adds, p50 and p99. The call itself is an
 *    empty function, so nothing but the header's handling is measured.
 *
 * Results are printed. Exits non-zero only when a request failed.
 */

import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { Socket } from 'node:net';
import { IdempotencyStore, takeoverDelayOf } from '@switchboard/gateway/idempotency';
import { RateLimiter } from '@switchboard/gateway/rate-limits';
import { callTimeoutMs } from '@switchboard/gateway/rest';
import { createLogger } from '@switchboard/runtime/log';
import { connectNats } from '@switchboard/runtime/nats';
import { latencyOf, round } from './measure/latency.js';

const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const requests = Number(process.env.BENCH_REQUESTS ?? 2000);
const log = createLogger('bench', 'warn');

/** CPU microseconds (user + system) of this process while `work` runs. */
async function cpuMicros(work: () => Promise<void>): Promise<number> {
  const before = process.cpuUsage();
  await work();
  const used = process.cpuUsage(before);
  return used.user + used.system;
}

function benchRateLimits(): { perRequestMicros: number } {
  const limiter = new RateLimiter({ perPrincipal: 1_000_000, perAddress: 1_000_000 });
  const res = new http.ServerResponse(new http.IncomingMessage(new Socket()));
  const principals = Array.from({ length: 10_000 }, (_, i) => ({ type: 'user' as const, userId: `usr_${i}` }));
  const addresses = Array.from({ length: 10_000 }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.1`);
  const takes = 1_000_000;
  for (let i = 0; i < 100_000; i++) limiter.take(res, principals[i % principals.length], undefined);
  const before = process.cpuUsage();
  for (let i = 0; i < takes; i++) {
    if (i % 2 === 0) limiter.take(res, principals[i % principals.length], undefined);
    else limiter.take(res, undefined, addresses[i % addresses.length]);
  }
  const used = process.cpuUsage(before);
  const micros = used.user + used.system;
  limiter.stop();
  return { perRequestMicros: round(micros / takes, 3) };
}

async function benchIdempotency() {
  const nats = connectNats(natsUrl, 'bench-gateway-edge', log);
  const nc = await nats;
  const store = new IdempotencyStore({
    nats,
    bucket: `bench-${randomUUID().slice(0, 8)}-idempotency`,
    secret: 'an idempotency secret of at least thirty-two bytes',
    log,
    takeoverAfterMs: takeoverDelayOf(callTimeoutMs),
  });
  // The store learns of the connection in a callback of the promise: let it run.
  await new Promise((resolve) => setImmediate(resolve));
  const signal = new AbortController().signal;
  const body = Buffer.from(JSON.stringify({ name: 'bench key', scopes: ['read'] }));
  // What POST /v1/keys answers: a record of about 1 KiB.
  const answer = { status: 201, headers: { 'Content-Type': 'application/json; charset=utf-8' }, body: Buffer.alloc(1024, 'x') };
  const request = (key: string) => ({
    key,
    scope: 'user:usr_bench org_bench',
    route: 'POST /v1/keys',
    path: '/v1/keys',
    query: '',
    body,
    requestId: 'req_bench',
  });
  const keys = Array.from({ length: requests }, () => randomUUID());
  // Warm up (the bucket's creation, JIT).
  for (let i = 0; i < 50; i++) await store.run(request(`warm-${i}`), async () => answer, signal);

  const measure = async (replay: boolean) => {
    const latencies: number[] = [];
    const micros = await cpuMicros(async () => {
      for (const key of keys) {
        const started = performance.now();
        const { replayed } = await store.run(request(key), async () => answer, signal);
        latencies.push(performance.now() - started);
        if (replayed !== replay) throw new Error(`expected replayed=${replay}`);
      }
    });
    return { cpuMicrosPerRequest: round(micros / requests, 1), latencyMs: latencyOf(latencies) };
  };
  const first = await measure(false);
  const replays = await measure(true);
  await nc.close();
  return { first, replays };
}

const rateLimits = benchRateLimits();
const idempotency = await benchIdempotency();
console.log(
  JSON.stringify(
    {
      rate_limits: { cpu_us_per_request: rateLimits.perRequestMicros },
      idempotency_key: {
        requests_each: requests,
        first_request: idempotency.first,
        replay: idempotency.replays,
        note: 'cpu of the gateway process only; NATS answers on this machine',
      },
    },
    null,
    2,
  ),
);
