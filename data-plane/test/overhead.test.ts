import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHandler, replyTo } from '@switchboard/data-plane/server';
import { callUpstream } from '@switchboard/data-plane/upstream';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { createLogger } from '@switchboard/runtime/log';
import { Metrics } from '@switchboard/runtime/metrics';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { afterEach, describe, expect, it } from 'vitest';

/** X-Service-Overhead-Ms (docs/api/front-door.md#responses): on every answer, the upstream's time left out. */

const milliseconds = /^\d+\.\d{3}$/;

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function listen(handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('the overhead header', () => {
  it('is on every answer given before the key is checked: errors and /healthz', async () => {
    const unreachable = undefined as never;
    const base = await listen(
      createHandler({
        log: createLogger('data-plane', 'silent'),
        metrics: new Metrics('data-plane'),
        completions: unreachable,
        lifecycle: { ready: true, draining: false },
      }),
    );
    const key = `Bearer sb_${'a'.repeat(49)}`;
    const requests: Array<[string, string, RequestInit, number]> = [
      ['GET', '/healthz', {}, 200],
      ['GET', '/v1/nothing', {}, 404],
      ['GET', '/v1/models', {}, 401],
      ['POST', '/v1/chat/completions', { body: '{}' }, 401],
      ['POST', '/v1/chat/completions', { body: 'x', headers: { authorization: key, 'content-type': 'text/plain' } }, 415],
      ['POST', '/v1/chat/completions', { body: '{"model": ', headers: { authorization: key, 'content-type': 'application/json' } }, 400],
    ];
    for (const [method, path, init, status] of requests) {
      const response = await fetch(`${base}${path}`, { method, ...init });
      await response.arrayBuffer();
      expect([path, response.status]).toEqual([path, status]);
      expect(response.headers.get('x-service-overhead-ms')).toMatch(milliseconds);
      // Nothing went upstream.
      expect(response.headers.get('x-service-upstream-ms')).toBe('0.000');
    }
  });

  it('leaves out the time the upstream took, which goes to the gateway apart', async () => {
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
    // The data plane's Reply, used as Completions uses it: the upstream's call and the read of its answer are timed apart.
    const base = await listen((_req, res) => {
      const reply = replyTo(res);
      void (async () => {
        const answer = await reply.upstream(() =>
          callUpstream(
            target,
            { model: 'm-slow', messages: [{ role: 'user', content: 'hi' }], stream: true },
            { headersTimeoutMs: 5000, apiKeys: {}, signal: reply.signal },
          ),
        );
        const text = await reply.upstream(() => answer.text());
        reply.json(200, {}, { bytes: text.length });
      })();
    });
    const started = performance.now();
    const response = await fetch(base);
    const totalMs = performance.now() - started;
    expect(response.status).toBe(200);
    await response.json();
    const overhead = Number(response.headers.get('x-service-overhead-ms'));
    const upstreamMs = Number(response.headers.get('x-service-upstream-ms'));
    // 8 tokens, each after the delay.
    expect(upstreamMs).toBeGreaterThanOrEqual(8 * tokenDelayMs - 5);
    expect(overhead).toBeGreaterThanOrEqual(0);
    expect(overhead + upstreamMs).toBeLessThanOrEqual(totalMs);
    expect(overhead).toBeLessThan(upstreamMs);
  });
});
