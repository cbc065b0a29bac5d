import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHandler, replyTo } from '@switchboard/data-plane/server';
import { callUpstream } from '@switchboard/data-plane/upstream';
import { createDataPlaneProxy } from '@switchboard/gateway/data-plane-proxy';
import type { ApiError } from '@switchboard/runtime/api-error';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { createLogger } from '@switchboard/runtime/log';
import { Metrics } from '@switchboard/runtime/metrics';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { afterEach, describe, expect, it } from 'vitest';

/** The gateway's hop to the data plane (gateway/src/data-plane-proxy.ts), between real servers on real sockets. */

const log = createLogger('gateway', 'silent');
const milliseconds = /^\d+\.\d{3}$/;

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function listen(handler: http.RequestListener): Promise<{ base: string; server: http.Server }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** The gateway's forwarding of the data plane's paths, its errors answered as the REST handler answers an ApiError. */
function gatewayTo(dataPlaneUrl: string) {
  const proxy = createDataPlaneProxy(dataPlaneUrl, log, 5000);
  return listen((req, res) => {
    proxy(req, res, (req.url ?? '/').split('?')[0], 'req_test', undefined).catch((err: unknown) => {
      const error = err as ApiError;
      res.writeHead(error.status, error.options.headers).end(JSON.stringify(error.body('req_test')));
    });
  });
}

describe('X-Service-Overhead-Ms through the gateway', () => {
  it('is on the data plane’s answers, the gateway’s hop included, and the upstream’s part stays inside', async () => {
    const unreachable = undefined as never;
    const dataPlane = await listen(
      createHandler({
        log: createLogger('data-plane', 'silent'),
        metrics: new Metrics('data-plane'),
        completions: unreachable,
        lifecycle: { ready: true, draining: false },
      }),
    );
    const gateway = await gatewayTo(dataPlane.base);
    for (const [method, path] of [
      ['POST', '/v1/chat/completions'],
      ['GET', '/v1/models'],
    ]) {
      const response = await fetch(`${gateway.base}${path}`, { method, body: method === 'POST' ? '{}' : undefined });
      expect(response.status).toBe(401);
      expect((await response.json()) as unknown).toMatchObject({ error: { code: 'unauthenticated' } });
      expect(response.headers.get('x-service-overhead-ms')).toMatch(milliseconds);
      expect(response.headers.get('x-service-upstream-ms')).toBeNull();
    }
  });

  it('leaves out the upstream’s time the data plane reports', async () => {
    const upstream = await OpenAiUpstream.start();
    closers.push(() => upstream.close());
    const tokenDelayMs = 40;
    upstream.mode('m-slow', { kind: 'slow', delayMs: tokenDelayMs });
    const catalog = ModelCatalog.parse(
      JSON.stringify({
        regions: { overseas: { base_url: upstream.baseUrl, api_key_env: 'TEST_UPSTREAM_KEY' } },
        models: [{ id: 'm-slow', region: 'overseas', tiers: [], input_usd_per_1m: '1', output_usd_per_1m: '2' }],
      }),
    );
    const model = catalog.models[0];
    const target = { model, region: catalog.regions.get(model.region)! };
    // The data plane's Reply, used as Completions uses it for an answer read whole before it is returned.
    const dataPlane = await listen((_req, res) => {
      const reply = replyTo(res);
      void (async () => {
        const answer = await reply.upstream(() =>
          callUpstream(
            target,
            { model: 'm-slow', messages: [{ role: 'user', content: 'hi' }], stream: true },
            { headersTimeoutMs: 5000, apiKeys: {}, signal: reply.signal },
          ),
        );
        await reply.upstream(() => answer.text());
        reply.json(200, {}, {});
      })();
    });
    const gateway = await gatewayTo(dataPlane.base);
    const started = performance.now();
    const response = await fetch(`${gateway.base}/v1/chat/completions`, { method: 'POST', body: '{}' });
    await response.json();
    const totalMs = performance.now() - started;
    expect(response.status).toBe(200);
    const overhead = Number(response.headers.get('x-service-overhead-ms'));
    expect(overhead).toBeGreaterThanOrEqual(0);
    // The 8 tokens' delays are the upstream's, not the platform's.
    expect(overhead).toBeLessThan(totalMs - 8 * tokenDelayMs + 5);
  });

  it('is on the gateway’s own 503 when the data plane cannot be reached', async () => {
    const gone = await listen(() => {});
    // Its port, closed: nothing answers there.
    await closers.pop()!();
    const gateway = await gatewayTo(gone.base);
    const response = await fetch(`${gateway.base}/v1/models`);
    expect(response.status).toBe(503);
    expect((await response.json()) as unknown).toMatchObject({ error: { code: 'service_unavailable' } });
    expect(response.headers.get('x-service-overhead-ms')).toMatch(milliseconds);
  });
});

describe('the hop', () => {
  it('reuses its connections to the data plane and passes a JSON answer on with its length, unframed', async () => {
    const unreachable = undefined as never;
    const dataPlane = await listen(
      createHandler({
        log: createLogger('data-plane', 'silent'),
        metrics: new Metrics('data-plane'),
        completions: unreachable,
        lifecycle: { ready: true, draining: false },
      }),
    );
    let connections = 0;
    dataPlane.server.on('connection', () => {
      connections += 1;
    });
    const gateway = await gatewayTo(dataPlane.base);
    for (let i = 0; i < 20; i++) {
      const response = await fetch(`${gateway.base}/v1/chat/completions`, { method: 'POST', body: '{}' });
      const body = await response.text();
      expect(response.status).toBe(401);
      expect(response.headers.get('content-length')).toBe(String(Buffer.byteLength(body)));
      expect(response.headers.get('transfer-encoding')).toBeNull();
    }
    expect(connections).toBe(1);
  });
});
