import type { Component } from '@switchboard/runtime/dev/mesh';
import { meshSuiteOfFile, newUser } from '@switchboard/testkit/mesh';
import { describe, expect, it } from 'vitest';

/**
 * Every component serves Prometheus metrics on a port of its own (METRICS_PORT), as a scraper
 * would read them after some traffic: requests per route, RPCs per method, the pool, the outbox,
 * consumer lag, the argon2 queue and the webhook queue. The public port never serves them.
 */

const suite = meshSuiteOfFile();

async function scrape(component: Component): Promise<string> {
  const res = await fetch(suite.mesh.metricsUrls[component]);
  expect(res.status, component).toBe(200);
  expect(res.headers.get('content-type'), component).toContain('text/plain');
  return res.text();
}

/** The value of the sample of `name` carrying all these labels (in any order), or undefined. */
function sampleOf(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = new Map([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => present.get(k) === v)) return Number(match[3]);
  }
  return undefined;
}

describe('metrics', () => {
  it("shows each component's series after traffic", async () => {
    const user = newUser();
    const registered = await suite.call('POST', '/v1/auth/register', { body: user });
    expect(registered.status, registered.text).toBe(201);
    const token = registered.json.session.access_token as string;
    const key = await suite.call('POST', '/v1/keys', { token, body: { name: 'metrics' } });
    expect(key.status, key.text).toBe(201);
    expect((await suite.call('GET', '/v1/models', { headers: { authorization: `Bearer ${key.json.full_key}` } })).status).toBe(200);

    const gateway = await scrape('gateway');
    expect(sampleOf(gateway, 'http_server_duration_seconds_count', { component: 'gateway', method: 'POST', route: '/v1/auth/register', status: '201' })).toBe(
      1,
    );
    expect(sampleOf(gateway, 'process_resident_memory_bytes', { component: 'gateway' })).toBeGreaterThan(0);

    const identity = await scrape('identity');
    expect(sampleOf(identity, 'rpc_server_duration_seconds_count', { component: 'identity', rpc: 'AuthService/Register', code: 'ok' })).toBe(1);
    for (const state of ['running', 'queued']) expect(sampleOf(identity, 'argon2_queue', { state }), state).toBeGreaterThanOrEqual(0);
    for (const state of ['used', 'idle', 'pending']) expect(sampleOf(identity, 'db_pool_connections', { state }), state).toBeGreaterThanOrEqual(0);
    expect(sampleOf(identity, 'outbox_oldest_unpublished_age_seconds')).toBeGreaterThanOrEqual(0);
    expect(sampleOf(identity, 'outbox_unpublished_events')).toBeGreaterThanOrEqual(0);

    // Consumer lag once the consumer has reached NATS (it starts beside the server).
    await expect
      .poll(async () => sampleOf(await scrape('keys'), 'event_consumer_lag_messages', { durable: 'keys-organization-deleted' }), { timeout: 15_000 })
      .toBeGreaterThanOrEqual(0);
    const webhooks = await scrape('webhooks');
    for (const state of ['due', 'scheduled', 'in_flight']) expect(sampleOf(webhooks, 'webhook_deliveries', { state }), state).toBeGreaterThanOrEqual(0);
    for (const state of ['healthy', 'failing', 'disabled']) expect(sampleOf(webhooks, 'webhook_endpoints', { state }), state).toBeGreaterThanOrEqual(0);
    // Earlier suites share the database: their endpoints may have open circuits here too.
    expect(sampleOf(webhooks, 'webhook_open_circuits')).toBeGreaterThanOrEqual(0);
    expect(sampleOf(webhooks, 'webhook_oldest_due_age_seconds')).toBeGreaterThanOrEqual(0);

    const dataPlane = await scrape('data-plane');
    expect(sampleOf(dataPlane, 'http_server_duration_seconds_count', { method: 'GET', route: '/v1/models', status: '200' })).toBe(1);
    for (const component of ['keys', 'billing', 'conversations'] as const) {
      expect(sampleOf(await scrape(component), 'db_pool_connections', { component, state: 'used' }), component).toBeGreaterThanOrEqual(0);
    }
    expect(sampleOf(await scrape('keys'), 'rpc_server_duration_seconds_count', { rpc: 'KeyService/CreateKey', code: 'ok' })).toBe(1);
  });

  it('keeps metrics off the public port, and serves nothing else on the metrics port', async () => {
    expect((await suite.call('GET', '/metrics')).status).toBe(404);
    const other = await fetch(suite.mesh.metricsUrls.gateway.replace('/metrics', '/v1/account'));
    expect(other.status).toBe(404);
    await other.text();
  });
});
