import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { create } from '@bufbuild/protobuf';
import { Health, HealthCheckRequestSchema, HealthCheckResponse_ServingStatus as ServingStatus } from '@switchboard/contracts/grpc/health/v1/health_pb';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { createDb, type Knex } from '@switchboard/runtime/db';
import type { Component, Mesh } from '@switchboard/runtime/dev/mesh';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { bootMesh, type RestCall, restClient, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * SIGTERM of a component while requests are in flight (docs/operations.md, "Shutdown"): its
 * readiness fails first (the gateway's /readyz 503, a service's Health NOT_SERVING) while it
 * still answers new requests for SHUTDOWN_DELAY; then its listener closes (new connections are
 * refused; the gateway answers 503 + Retry-After for a service that is away); the requests in
 * flight finish; the process exits 0. Slow requests are real ones: a completion streamed slowly
 * by the upstream, and a RecordUsage waiting on a row lock this test holds in billing's table.
 */

const delay = '2s';
const drainTimeoutMs = 15_000;
/** The slow model streams `slowWords` tokens, one every `slowTokenMs`: about 6 s in flight. */
const slowModel = 'slow-model';
const slowWords = 12;
const slowTokenMs = 500;

let mesh: Mesh;
let call: RestCall;
let upstream: OpenAiUpstream;
let catalogDir: string;
let billingDb: Knex;

beforeAll(async () => {
  upstream = await OpenAiUpstream.start();
  upstream.words = slowWords;
  upstream.mode(slowModel, { kind: 'slow', delayMs: slowTokenMs });
  catalogDir = await mkdtemp(path.join(tmpdir(), 'switchboard-shutdown-'));
  const catalogFile = path.join(catalogDir, 'models.json');
  await writeFile(
    catalogFile,
    JSON.stringify({
      regions: { overseas: { base_url: upstream.baseUrl, api_key_env: 'SHUTDOWN_TEST_KEY' } },
      models: [{ id: slowModel, region: 'overseas', tiers: [], input_usd_per_1m: '1.00', output_usd_per_1m: '2.00' }],
    }),
  );
  mesh = await bootMesh({
    SWITCHBOARD_MODELS_FILE: catalogFile,
    SHUTDOWN_TEST_KEY: 'sk-shutdown',
    SHUTDOWN_DELAY: delay,
    DRAIN_TIMEOUT: `${drainTimeoutMs}ms`,
  });
  call = restClient(mesh.gatewayUrl);
  billingDb = createDb(mesh.env.DATABASE_URL, 'billing');
});

afterAll(async () => {
  await billingDb?.destroy();
  await mesh?.stop();
  await upstream?.close();
  if (catalogDir) await rm(catalogDir, { recursive: true, force: true });
});

/** A user with an API key. */
async function userWithKey(): Promise<SignedUp & { keyId: string; fullKey: string }> {
  const user = await signUp(call);
  const created = await call('POST', '/v1/keys', { token: user.token, body: { name: 'shutdown' } });
  expect(created.status, created.text).toBe(201);
  return { ...user, keyId: created.json.key.key_id, fullKey: created.json.full_key };
}

/** A streamed completion of the slow model through `baseUrl`: resolves `started` on its first chunk, `done` with the whole body. */
function slowStream(baseUrl: string, fullKey: string): { started: Promise<void>; done: Promise<{ status: number; body: string }> } {
  let markStarted!: () => void;
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const done = new Promise<{ status: number; body: string }>((resolve, reject) => {
    const request = http.request(
      `${baseUrl}/v1/chat/completions`,
      { method: 'POST', agent: false, headers: { authorization: `Bearer ${fullKey}`, 'content-type': 'application/json' } },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          body += chunk;
          markStarted();
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(JSON.stringify({ model: slowModel, stream: true, max_tokens: slowWords, messages: [{ role: 'user', content: 'Say hi' }] }));
  });
  return { started, done };
}

/** The text a finished stream carried, and whether it ended with [DONE]. */
function streamed(body: string): { text: string; finished: boolean } {
  let text = '';
  for (const line of body.split('\n')) {
    if (!line.startsWith('data: {')) continue;
    const chunk = JSON.parse(line.slice(6)) as { choices?: Array<{ delta?: { content?: string } }> };
    text += chunk.choices?.[0]?.delta?.content ?? '';
  }
  return { text, finished: body.trimEnd().endsWith('data: [DONE]') };
}

const fullAnswer = Array.from({ length: slowWords }, (_, i) => `w${i + 1}`).join(' ');

/** Whether a new TCP connection to `url` is refused (the listener is closed). */
function refused(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const request = http.get(`${url}/healthz`, { agent: false, timeout: 2000 }, (response) => {
      response.resume();
      resolve(false);
    });
    request.on('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
    request.on('timeout', () => request.destroy());
  });
}

async function restart(component: Component): Promise<void> {
  await mesh.startComponent(component);
}

describe('graceful shutdown on SIGTERM', () => {
  it('the gateway: /readyz 503 first, still serving; then the listener closes; the stream in flight finishes; exit 0', async () => {
    const user = await userWithKey();
    const stream = slowStream(mesh.gatewayUrl, user.fullKey);
    await stream.started;
    const stopped = mesh.stopComponent('gateway');
    const readyz = await eventually(async () => {
      const response = await call('GET', '/readyz');
      return response.status === 503 ? response : undefined;
    }, 'the gateway to report not ready');
    expect(readyz.json).toEqual({ status: 'shutting_down' });
    // The load balancer's probe of this replica says the same.
    expect((await call('GET', '/readyz?scope=self')).status).toBe(503);
    // Unready is not gone: during SHUTDOWN_DELAY requests are still served.
    const balance = await call('GET', '/v1/billing/balance', { token: user.token });
    expect(balance.status, balance.text).toBe(200);
    await eventually(() => refused(mesh.gatewayUrl), "the gateway's listener to close");
    const { status, body } = await stream.done;
    expect(status).toBe(200);
    expect(streamed(body)).toEqual({ text: fullAnswer, finished: true });
    expect(await stopped).toEqual({ code: 0, signal: null });
    expect(mesh.output('gateway')).toContain('"msg":"stopped"');
    await restart('gateway');
  });

  it('the data plane: /healthz 503 first, then the stream in flight finishes and it exits 0', async () => {
    const user = await userWithKey();
    const dataPlaneUrl = mesh.env.DATA_PLANE_URL;
    const stream = slowStream(mesh.gatewayUrl, user.fullKey);
    await stream.started;
    const stopped = mesh.stopComponent('data-plane');
    await eventually(
      async () => (await fetch(`${dataPlaneUrl}/healthz`, { signal: AbortSignal.timeout(2000) })).status === 503,
      'the data plane to report not ready',
    );
    await eventually(() => refused(dataPlaneUrl), "the data plane's listener to close");
    // Away: the gateway answers new completions with a clean 503 and Retry-After.
    const away = await call('POST', '/v1/chat/completions', {
      headers: { authorization: `Bearer ${user.fullKey}` },
      body: { model: slowModel, max_tokens: 1, messages: [{ role: 'user', content: 'Say hi' }] },
    });
    expect(away.status, away.text).toBe(503);
    expect(away.headers.get('retry-after')).toBe('1');
    const { status, body } = await stream.done;
    expect(status).toBe(200);
    expect(streamed(body)).toEqual({ text: fullAnswer, finished: true });
    expect(await stopped).toEqual({ code: 0, signal: null });
    await restart('data-plane');
  });

  it('a service: Health NOT_SERVING first, still serving; then refused (503 + Retry-After at the gateway); the call in flight commits; exit 0', async () => {
    const user = await userWithKey();
    const other = await signUp(call);
    // Billing's account row exists once the balance was read; a lock on it holds RecordUsage.
    expect((await call('GET', '/v1/billing/balance', { token: user.token })).status).toBe(200);
    const health = meshClient(Health, mesh.urls.billing, 'billing', null, { meshSecret: mesh.env.SWITCHBOARD_MESH_SECRET });
    const usage = meshClient(UsageService, mesh.urls.billing, 'billing', { caller: 'data-plane' }, { meshSecret: mesh.env.SWITCHBOARD_MESH_SECRET });
    const generationId = `gen_shutdown_${Date.now().toString(36)}`;
    const lock = await billingDb.transaction();
    let recorded: Promise<{ duplicate: boolean; usageId: string }> | undefined;
    try {
      await lock.raw('SELECT 1 FROM accounts WHERE workspace_id = ? FOR UPDATE', [user.workspaceId]);
      recorded = usage.recordUsage(
        { generationId, keyId: user.keyId, workspaceId: user.workspaceId, model: 'service/fast', inputTokens: 1000n, outputTokens: 500n },
        { timeoutMs: 30_000 },
      );
      await eventually(async () => {
        const { rows } = await billingDb.raw<{ rows: Array<{ n: number }> }>(
          `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE NOT l.granted AND a.datname = current_database() AND a.query ILIKE '%accounts%'`,
        );
        return rows[0].n > 0;
      }, 'RecordUsage to wait on the lock');

      const stopped = mesh.stopComponent('billing');
      await eventually(
        async () => (await health.check(create(HealthCheckRequestSchema), { timeoutMs: 2000 })).status === ServingStatus.NOT_SERVING,
        "billing's Health to answer NOT_SERVING",
      );
      const readyz = await call('GET', '/readyz');
      expect(readyz.status).toBe(503);
      expect(readyz.json.services.billing).toBe('not_serving');
      // A service going away does not unroute the gateway: its own probe stays ready.
      const self = await call('GET', '/readyz?scope=self');
      expect(self.status, self.text).toBe(200);
      // Unready, still serving (SHUTDOWN_DELAY).
      const served = await call('GET', '/v1/billing/balance', { token: other.token });
      expect(served.status, served.text).toBe(200);
      // Then away: a clean 503 with Retry-After, while RecordUsage still waits in the old process.
      const away = await eventually(async () => {
        const response = await call('GET', '/v1/billing/balance', { token: other.token });
        return response.status === 503 ? response : undefined;
      }, 'billing to be away');
      expect(away.headers.get('retry-after')).toBe('1');
      expect(away.json.error.code).toBe('service_unavailable');

      await lock.commit();
      expect(await recorded).toMatchObject({ duplicate: false });
      expect(await stopped).toEqual({ code: 0, signal: null });
    } finally {
      if (!lock.isCompleted()) await lock.rollback();
    }
    const rows = await billingDb('usage_records').where({ generation_id: generationId }).select('id');
    expect(rows).toEqual([{ id: (await recorded)?.usageId }]);
    await restart('billing');
  });
});
