import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type { Completions } from '@switchboard/data-plane/completions';
import { createHandler } from '@switchboard/data-plane/server';
import { createDataPlaneProxy } from '@switchboard/gateway/data-plane-proxy';
import { answerClientError } from '@switchboard/runtime/client-error';
import { createLogger } from '@switchboard/runtime/log';
import { Metrics, startMetricsServer } from '@switchboard/runtime/metrics';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RateLimiter } from '../src/rate-limits.js';
import { maxBodyBytes } from '../src/rest.js';
import { servicelessGateway } from './serviceless-gateway.js';

/**
 * docs/conventions.md#errors: every error the product answers carries `Cache-Control: no-store`,
 * through the real handlers on real sockets: the gateway's REST errors (refused input and
 * credentials, unknown routes, throttling, its own failures), the data plane's front-door errors
 * passed on by the gateway's hop, the hop's own 503, Node's refusals before any handler, and the
 * metrics port's.
 */

const closers: Array<() => Promise<void>> = [];
let gateway: string;
let dataPlane: string;

async function listen(handler: http.RequestListener): Promise<{ base: string; server: http.Server }> {
  const server = http.createServer(handler);
  server.on('clientError', answerClientError);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** A port nothing listens on. */
async function closedPort(): Promise<string> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

beforeAll(async () => {
  // A key replica that fails: the data plane's own 500.
  const failing = {
    authorize: () => Promise.reject(new Error('the key replica failed')),
  } as unknown as Completions;
  dataPlane = (
    await listen(
      createHandler({
        log: createLogger('data-plane', 'silent'),
        metrics: new Metrics('data-plane'),
        completions: failing,
        lifecycle: { ready: true, draining: false },
      }),
    )
  ).base;
  const toDataPlane = createDataPlaneProxy(dataPlane, createLogger('gateway', 'silent'), 5000);
  const toNowhere = createDataPlaneProxy(await closedPort(), createLogger('gateway', 'silent'), 5000);
  const handler = servicelessGateway({
    rateLimiter: new RateLimiter({ perPrincipal: 100, perAddress: 4 }),
    async builtIn(req, res, pathname, requestId, clientIp) {
      if (pathname === '/v1/models') await toDataPlane(req, res, pathname, requestId, clientIp);
      else if (pathname === '/v1/chat/completions') await toNowhere(req, res, pathname, requestId, clientIp);
      else if (pathname === '/boom') throw new Error('a bug');
      else return false;
      return true;
    },
  });
  gateway = (await listen(handler)).base;
});

afterAll(async () => {
  for (const close of closers.splice(0)) await close();
});

/** The status and Cache-Control of an answer. */
async function caching(url: string, init: RequestInit = {}): Promise<[number, string | null]> {
  const response = await fetch(url, init);
  await response.arrayBuffer();
  return [response.status, response.headers.get('cache-control')];
}

const json = { 'content-type': 'application/json' };

describe('Cache-Control: no-store on every error', () => {
  it('is on the gateway’s REST errors, whatever answers them', async () => {
    // Four requests of one address without credentials (the limit), then the fifth is throttled.
    expect(await caching(`${gateway}/v1/auth/login`, { method: 'POST', body: '{"email": ', headers: json })).toEqual([400, 'no-store']);
    expect(await caching(`${gateway}/v1/account`)).toEqual([401, 'no-store']);
    const big = JSON.stringify({ password: 'x'.repeat(maxBodyBytes) });
    expect(await caching(`${gateway}/v1/auth/login`, { method: 'POST', body: big, headers: json })).toEqual([413, 'no-store']);
    // An Idempotency-Key without the store that keeps its answers.
    const keyed = { ...json, 'idempotency-key': 'k1' };
    expect(await caching(`${gateway}/v1/auth/login`, { method: 'POST', body: '{}', headers: keyed })).toEqual([503, 'no-store']);
    expect(await caching(`${gateway}/v1/auth/login`, { method: 'POST', body: '{}', headers: json })).toEqual([429, 'no-store']);

    expect(await caching(`${gateway}/v1/nothing-here`)).toEqual([404, 'no-store']);
    expect(await caching(`${gateway}/v1/auth/login`, { method: 'DELETE' })).toEqual([405, 'no-store']);
    expect(await caching(`${gateway}/boom`)).toEqual([500, 'no-store']);
  });

  it('is on the data plane’s front-door errors, directly and through the gateway, and on the hop’s own 503', async () => {
    for (const base of [dataPlane, gateway]) {
      expect(await caching(`${base}/v1/models`)).toEqual([401, 'no-store']);
      expect(await caching(`${base}/v1/models`, { headers: { authorization: 'Bearer sb_test' } })).toEqual([500, 'no-store']);
    }
    expect(await caching(`${dataPlane}/v1/nothing-here`)).toEqual([404, 'no-store']);
    // The data plane cannot be reached: the gateway answers for it.
    expect(await caching(`${gateway}/v1/chat/completions`, { method: 'POST', body: '{}', headers: json })).toEqual([503, 'no-store']);
  });

  it('is on the refusals Node answers before any handler runs', async () => {
    const { hostname, port } = new URL(gateway);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), hostname, () => socket.end(`GET /v1/account HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString('latin1');
      });
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 431 /);
    expect(answer).toMatch(/\r\nCache-Control: no-store\r\n/);
  });

  it('is on the metrics port’s errors', async () => {
    const metrics = await startMetricsServer({ metrics: new Metrics('gateway'), port: 0, host: '127.0.0.1', log: createLogger('gateway', 'silent') });
    closers.push(() => metrics.close());
    expect(await caching(`http://127.0.0.1:${metrics.port}/elsewhere`)).toEqual([404, 'no-store']);
  });
});
