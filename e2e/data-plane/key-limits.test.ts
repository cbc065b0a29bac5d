import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { eventually } from '@switchboard/runtime/testing';
import { bootMesh, restClient, signUp } from '@switchboard/testkit/mesh';
import { catalogModel, type TestCatalog, writeTestCatalog } from '@switchboard/testkit/model-catalog-file';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientAt, Replica } from './replica.js';

/**
 * Keys II at the front door through the real path (docs/api/front-door.md#order-of-checks,
 * docs/money-path.md#rate-limit-leases): keys made over REST with scopes, expiry, allowed models,
 * rate limits and spend limits, used with the official `openai` client at the gateway and at a
 * second data plane. Rate limits hold exactly across the two replicas (the keys service owns
 * them); every answer of a limited key carries OpenAI's x-ratelimit-* headers.
 */

// Model ids of this run only: routing scores of other runs in the same database stay apart.
const tag = randomBytes(3).toString('hex');
const FAST_A = `kl-fast-a-${tag}`;
const FAST_B = `kl-fast-b-${tag}`;
const BAL_A = `kl-bal-a-${tag}`;

/**
 * The upstream behind a proxy that counts the calls in progress: what a max_concurrent limit
 * bounds is the most calls the upstream sees at once.
 */
class CountingProxy {
  running = 0;
  most = 0;
  private constructor(private readonly server: http.Server) {}

  static async start(target: string): Promise<CountingProxy> {
    let proxy!: CountingProxy;
    const server = http.createServer((req, res) => {
      proxy.running += 1;
      proxy.most = Math.max(proxy.most, proxy.running);
      let done = false;
      const end = () => {
        if (done) return;
        done = true;
        proxy.running -= 1;
      };
      res.on('close', end);
      const url = new URL(req.url ?? '/', target);
      const upstream = http.request(url, { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      req.pipe(upstream);
    });
    proxy = new CountingProxy(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  /** The base URL for the model catalog (`…/v1`). */
  get baseUrl(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  reset(): void {
    this.most = this.running;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

let mesh: Mesh;
let call: ReturnType<typeof restClient>;
let upstream: OpenAiUpstream;
let proxy: CountingProxy;
let catalog: TestCatalog | undefined;
let second: Replica;

beforeAll(async () => {
  upstream = await OpenAiUpstream.start();
  proxy = await CountingProxy.start(upstream.baseUrl.replace(/\/v1$/, ''));
  catalog = await writeTestCatalog({ overseas: proxy }, [
    catalogModel(FAST_A, 'overseas', ['fast']),
    catalogModel(FAST_B, 'overseas', ['fast']),
    catalogModel(BAL_A, 'overseas', ['balanced']),
  ]);
  mesh = await bootMesh({ ...catalog.env, ROUTING_SEED: '7' });
  call = restClient(mesh.gatewayUrl);
  second = await Replica.start(mesh.env);
});

afterAll(async () => {
  await second?.stop();
  await mesh?.stop();
  await proxy?.close();
  await upstream?.close();
  await catalog?.remove();
});

interface Key {
  keyId: string;
  fullKey: string;
  token: string;
  workspaceId: string;
  /** The client at the gateway, and at the second data plane. */
  clients: [OpenAI, OpenAI];
}

/** A new user (its own workspace, with the tests' opening credit) and a key of it with `fields` (docs/api/keys.md). */
async function keyWith(fields: Record<string, unknown>): Promise<Key> {
  const user = await signUp(call);
  const created = await call('POST', '/v1/keys', { token: user.token, body: { name: 'key limits', ...fields } });
  expect(created.status, created.text).toBe(201);
  const fullKey = created.json.full_key as string;
  return {
    keyId: created.json.key.key_id,
    fullKey,
    token: user.token,
    workspaceId: user.workspaceId,
    clients: [clientAt(mesh.gatewayUrl, fullKey), second.client(fullKey)],
  };
}

const ask = { model: 'service/fast', messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 8 };

/** A request through `baseUrl`'s front door with fetch: its status, headers and body as they came. */
async function post(baseUrl: string, fullKey: string, body: Record<string, unknown>) {
  const response = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${fullKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return {
    status: response.status,
    headers: response.headers,
    json: (await response.json()) as { error?: Record<string, unknown>; service?: { routed_model: string } },
  };
}

type ApiError = InstanceType<typeof OpenAI.APIError>;
async function outcome(work: Promise<unknown>): Promise<'ok' | ApiError> {
  try {
    await work;
    return 'ok';
  } catch (err) {
    if (err instanceof OpenAI.APIError && typeof err.status === 'number') return err;
    throw err;
  }
}

/** Waits into the next UTC minute when this one has too little left for a burst to be decided inside it. */
async function awayFromMinuteEnd(marginMs = 20_000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < marginMs) await new Promise((resolve) => setTimeout(resolve, left + 100));
}

describe('rate limits across two data planes', () => {
  it('requests_per_minute 20: of 100 requests at once over both replicas exactly 20 pass, the rest get 429 with Retry-After', async () => {
    const key = await keyWith({ rate_limits: { requests_per_minute: 20 } });
    await awayFromMinuteEnd();
    const minute = Math.floor(Date.now() / 60_000);
    const outcomes = await Promise.all(Array.from({ length: 100 }, (_, i) => outcome(key.clients[i % 2].chat.completions.create(ask))));
    expect(Math.floor(Date.now() / 60_000), 'the burst was decided within one minute').toBe(minute);
    expect(outcomes.filter((o) => o === 'ok')).toHaveLength(20);
    const refused = outcomes.filter((o): o is ApiError => o !== 'ok');
    expect(refused).toHaveLength(80);
    for (const err of refused) {
      expect(err.status).toBe(429);
      const body = err.error as { code: string; metadata: { limit: number; scope: string; reset_seconds: number } };
      expect(body.code).toBe('rate_limit_exceeded');
      expect(body.metadata).toMatchObject({ limit: 20, scope: 'requests' });
      expect(body.metadata.reset_seconds).toBeGreaterThanOrEqual(1);
      expect(body.metadata.reset_seconds).toBeLessThanOrEqual(60);
      expect(err.headers?.get('retry-after')).toBe(String(body.metadata.reset_seconds));
      expect(err.headers?.get('x-ratelimit-limit-requests')).toBe('20');
      expect(err.headers?.get('x-ratelimit-remaining-requests')).toBe('0');
    }
  }, 120_000);

  it('max_concurrent 3: never a fourth upstream call at once, the others get 429 scope concurrency, and slots come back', async () => {
    const key = await keyWith({ rate_limits: { max_concurrent: 3 } });
    for (const model of [FAST_A, FAST_B]) upstream.mode(model, { kind: 'slow', delayMs: 150 });
    try {
      proxy.reset();
      const outcomes = await Promise.all(
        Array.from({ length: 12 }, async (_, i) => {
          const result = await outcome(
            (async () => {
              const stream = await key.clients[i % 2].chat.completions.create({ ...ask, stream: true });
              for await (const _chunk of stream) {
                // read to the end: the slot is held while the stream runs
              }
            })(),
          );
          return result;
        }),
      );
      expect(proxy.most).toBeLessThanOrEqual(3);
      // Each stream lasts over a second, far longer than the burst takes to be decided: most are refused.
      expect(outcomes.filter((o) => o === 'ok').length).toBeGreaterThanOrEqual(1);
      const refused = outcomes.filter((o): o is ApiError => o !== 'ok');
      expect(refused.length).toBeGreaterThanOrEqual(6);
      for (const err of refused) {
        expect(err.status).toBe(429);
        expect(err.error).toMatchObject({ code: 'rate_limit_exceeded', metadata: { limit: 3, scope: 'concurrency', reset_seconds: 1 } });
      }
      // Every stream ended: the slots are free again (a replica gives idle slots back within a second or two).
      await eventually(async () => (await outcome(key.clients[1].chat.completions.create(ask))) === 'ok', 'a slot to be free again', 10_000);
    } finally {
      for (const model of [FAST_A, FAST_B]) upstream.mode(model, { kind: 'ok' });
    }
  }, 60_000);

  it('tokens_per_minute counts the estimate: a request whose estimate is over the limit is a 429 scope tokens', async () => {
    const key = await keyWith({ rate_limits: { tokens_per_minute: 500 } });
    await awayFromMinuteEnd(5000);
    // The estimate: the body's bytes and 1000 tokens of output, over the 500 of the limit.
    const over = await post(mesh.gatewayUrl, key.fullKey, { ...ask, max_tokens: 1000 });
    expect(over.status).toBe(429);
    expect(over.json.error).toMatchObject({ code: 'rate_limit_exceeded', metadata: { limit: 500, scope: 'tokens' } });
    const within = await post(mesh.gatewayUrl, key.fullKey, ask);
    expect(within.status).toBe(200);
    expect(within.headers.get('x-ratelimit-limit-tokens')).toBe('500');
    expect(Number(within.headers.get('x-ratelimit-remaining-tokens'))).toBeLessThan(500);
  });
});

describe('x-ratelimit headers', () => {
  it('are on every answer of a key with limits, successes and refusals, and on none of a key without', async () => {
    const key = await keyWith({ rate_limits: { requests_per_minute: 100, tokens_per_minute: 100_000 } });
    await awayFromMinuteEnd(5000);
    const first = await post(mesh.gatewayUrl, key.fullKey, ask);
    const secondAnswer = await post(mesh.gatewayUrl, key.fullKey, ask);
    const refused = await post(mesh.gatewayUrl, key.fullKey, { ...ask, n: 99 });
    const list = await fetch(`${mesh.gatewayUrl}/v1/models`, { headers: { authorization: `Bearer ${key.fullKey}` } });
    expect([first.status, secondAnswer.status, refused.status, list.status]).toEqual([200, 200, 400, 200]);
    for (const headers of [first.headers, secondAnswer.headers, refused.headers, list.headers]) {
      expect(headers.get('x-ratelimit-limit-requests')).toBe('100');
      expect(headers.get('x-ratelimit-limit-tokens')).toBe('100000');
      expect(headers.get('x-ratelimit-reset-requests')).toMatch(/^\d+s$/);
      expect(headers.get('x-ratelimit-reset-tokens')).toMatch(/^\d+s$/);
    }
    expect(first.headers.get('x-ratelimit-remaining-requests')).toBe('99');
    expect(secondAnswer.headers.get('x-ratelimit-remaining-requests')).toBe('98');
    const plain = await keyWith({});
    const free = await post(mesh.gatewayUrl, plain.fullKey, ask);
    expect(free.status).toBe(200);
    expect([...free.headers.keys()].filter((name) => name.startsWith('x-ratelimit'))).toEqual([]);
  });
});

describe('who may use what', () => {
  it('allowed_models: a tier routes only among the allowed concrete models, another model is 403 model_not_allowed, and /v1/models lists only them', async () => {
    const key = await keyWith({ allowed_models: [`kl-fast-b-*`] });
    for (let i = 0; i < 6; i++) {
      const answer = await post(mesh.gatewayUrl, key.fullKey, ask);
      expect(answer.status).toBe(200);
      expect(answer.json.service?.routed_model).toBe(FAST_B);
    }
    for (const model of ['service/balanced', FAST_A]) {
      const refused = await post(mesh.gatewayUrl, key.fullKey, { ...ask, model });
      expect(refused.status).toBe(403);
      expect(refused.json.error).toMatchObject({ code: 'model_not_allowed', param: 'model', type: 'permission_error' });
    }
    const list = await key.clients[0].models.list();
    expect(list.data.map((model) => model.id)).toEqual(['service/fast', FAST_B]);
  });

  it('an inference-only key makes completions and lists models; a key without inference is 403 insufficient_scope', async () => {
    const inference = await keyWith({ scopes: ['inference'] });
    for (const client of inference.clients) {
      expect(await outcome(client.chat.completions.create(ask))).toBe('ok');
      expect((await client.models.list()).data.length).toBeGreaterThan(0);
    }
    const manager = await keyWith({ scopes: ['read', 'manage'] });
    for (const client of manager.clients) {
      const refused = await outcome(client.chat.completions.create(ask));
      expect(refused).toBeInstanceOf(OpenAI.PermissionDeniedError);
      expect((refused as ApiError).error).toMatchObject({ code: 'insufficient_scope', metadata: { required_scope: 'inference' } });
    }
  });

  it('an expired key is 401 api_key_expired at both replicas within a second of its expires_at', async () => {
    const expiresAt = new Date(Date.now() + 4000);
    const key = await keyWith({ expires_at: expiresAt.toISOString() });
    for (const client of key.clients) expect(await outcome(client.chat.completions.create(ask))).toBe('ok');
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt.getTime() + 1000 - Date.now())));
    for (const client of key.clients) {
      const refused = await outcome(client.chat.completions.create(ask));
      expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
      expect((refused as ApiError).error).toMatchObject({ code: 'api_key_expired' });
    }
  });
});

describe('budgets of every period, the key’s and the workspace’s', () => {
  it('a spent daily limit of the key is a 402 with scope key and period day; of the workspace, scope workspace', async () => {
    const key = await keyWith({});
    const limits = await call('PUT', `/v1/keys/${key.keyId}/spend-limits`, { token: key.token, body: { spend_limits: [{ period: 'day', amount_usd: '0' }] } });
    expect(limits.status, limits.text).toBe(200);
    await eventually(async () => (await post(mesh.gatewayUrl, key.fullKey, ask)).status === 402, 'the key’s daily limit to apply', 5000);
    const byKey = await post(second.url, key.fullKey, ask);
    expect(byKey.json.error).toMatchObject({ code: 'spend_cap_exceeded', metadata: { scope: 'key', period: 'day', cap_usd: '0' } });

    const other = await keyWith({});
    const workspace = await call('PUT', '/v1/billing/spend-limits', { token: other.token, body: { spend_limits: [{ period: 'week', amount_usd: '0' }] } });
    expect(workspace.status, workspace.text).toBe(200);
    await eventually(async () => (await post(mesh.gatewayUrl, other.fullKey, ask)).status === 402, 'the workspace’s weekly limit to apply', 5000);
    const byWorkspace = await post(second.url, other.fullKey, ask);
    expect(byWorkspace.json.error).toMatchObject({ code: 'spend_cap_exceeded', metadata: { scope: 'workspace', period: 'week', cap_usd: '0' } });
  });
});
