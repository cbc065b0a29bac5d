import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { Money } from '@switchboard/runtime/money';
import { eventually } from '@switchboard/runtime/testing';
import { PrivateNats } from '@switchboard/testkit/chaos/private-infra';
import { bootMesh, restClient, signUp } from '@switchboard/testkit/mesh';
import OpenAI from 'openai';
import type { ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The money path while NATS is down (docs/money-path.md#faults), on a mesh whose nats-server is
 * this file's own (testkit/src/chaos/private-infra.ts), so it can be killed and started again:
 * - a revoked key is refused by the data plane within 1 s all the same (its key replica polls the
 *   keys service; the key event waits in the outbox);
 * - requests go on, their usage waiting in the data plane's bounded local queue; when that queue
 *   is full a request is refused with 503 before anything goes upstream; once NATS is back every
 *   answered generation is billed once, at the cost it answered.
 */

const tag = randomBytes(3).toString('hex');
const FAST = `faults-fast-${tag}`;
/** The data plane's local queue of usage records (WORK_QUEUE_MAX): small, so that it fills. */
const workQueueMax = 3;

let dir: string;
let nats: PrivateNats;
let upstream: OpenAiUpstream;
let mesh: Mesh;
let call: ReturnType<typeof restClient>;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'switchboard-money-faults-'));
  await chmod(dir, 0o755);
  nats = await PrivateNats.start(dir);
  upstream = await OpenAiUpstream.start();
  const catalogFile = path.join(dir, 'models.json');
  await writeFile(
    catalogFile,
    JSON.stringify({
      regions: { overseas: { base_url: upstream.baseUrl, api_key_env: 'TEST_UPSTREAM_KEY' } },
      models: [{ id: FAST, region: 'overseas', tiers: ['fast', 'balanced'], input_usd_per_1m: '0.10', output_usd_per_1m: '0.40' }],
    }),
  );
  mesh = await bootMesh({ NATS_URL: nats.url, SWITCHBOARD_MODELS_FILE: catalogFile, TEST_UPSTREAM_KEY: 'sk-test', WORK_QUEUE_MAX: String(workQueueMax) });
  call = restClient(mesh.gatewayUrl);
});

afterAll(async () => {
  await mesh?.stop();
  await nats?.down();
  await upstream?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const ask: ChatCompletionCreateParamsNonStreaming = { model: 'service/fast', messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 8 };

async function account() {
  const user = await signUp(call);
  const created = await call('POST', '/v1/keys', { token: user.token, body: { name: 'faults' } });
  expect(created.status, created.text).toBe(201);
  const client = new OpenAI({ apiKey: created.json.full_key, baseURL: `${mesh.gatewayUrl}/v1`, maxRetries: 0 });
  return { token: user.token, workspaceId: user.workspaceId, keyId: created.json.key.key_id as string, client };
}

const balanceOf = async (token: string) => new Money((await call('GET', '/v1/billing/balance', { token })).json.balance_usd);

async function outcomeOf<T>(promise: Promise<T>): Promise<T | InstanceType<typeof OpenAI.APIError>> {
  return promise.catch((err: unknown) => {
    if (err instanceof OpenAI.APIError) return err;
    throw err;
  });
}

describe('NATS down', () => {
  it('a revoked key is refused by the data plane within 1 s', async () => {
    const ws = await account();
    expect((await ws.client.chat.completions.create(ask)).choices[0].message.content).toBeTruthy();
    // The probe: a model no catalog has. The key is checked first (docs/conventions.md#order-of-checks):
    // 400 model_unavailable while it is good, 401 once revoked; nothing goes upstream and nothing is billed either way.
    const probe = () => outcomeOf(ws.client.chat.completions.create({ ...ask, model: `no-such-model-${tag}` }));
    expect(await probe()).toMatchObject({ status: 400, code: 'model_unavailable' });

    await nats.kill();
    try {
      expect((await call('DELETE', `/v1/keys/${ws.keyId}`, { token: ws.token })).status).toBe(200);
      const revokedAt = performance.now();
      const refused = await eventually(
        async () => {
          const outcome = await probe();
          return outcome instanceof OpenAI.AuthenticationError && outcome;
        },
        'the revoked key to be refused with NATS down',
        1000,
        10,
      );
      const ms = performance.now() - revokedAt;
      expect(ms).toBeLessThan(1000);
      expect(refused).toMatchObject({ status: 401, code: 'api_key_revoked' });
      const before = upstream.requests.length;
      expect(await outcomeOf(ws.client.chat.completions.create(ask))).toMatchObject({ status: 401, code: 'api_key_revoked' });
      expect(upstream.requests.length).toBe(before);
    } finally {
      await nats.up();
    }
  }, 60_000);

  it('requests go on with usage queued; a full queue is 503 before the upstream; once NATS is back each answer is billed once', async () => {
    const ws = await account();
    await eventually(async () => (await balanceOf(ws.token)).eq('1.00'), 'the opening credit');
    const answered: Array<{ generationId: string; cost: string }> = [];
    await nats.kill();
    try {
      for (let i = 0; i < workQueueMax; i++) {
        const completion = await ws.client.chat.completions.create(ask);
        const service = (completion as unknown as { service: { generation_id: string; cost_usd: string } }).service;
        expect(service, JSON.stringify(completion)).toBeDefined();
        answered.push({ generationId: service.generation_id, cost: service.cost_usd });
      }
      // The queue holds what JetStream could not take: no place for one more record, so no upstream call.
      const before = upstream.requests.length;
      const full = await outcomeOf(ws.client.chat.completions.create(ask));
      expect(full).toBeInstanceOf(OpenAI.APIError);
      expect(full).toMatchObject({ status: 503, code: 'service_unavailable' });
      expect((full as InstanceType<typeof OpenAI.APIError>).headers?.get('retry-after')).toBeTruthy();
      expect(upstream.requests.length).toBe(before);
    } finally {
      await nats.up();
    }

    // NATS is back: the queued records reach billing, each once.
    const db = new pg.Client({ connectionString: mesh.env.DATABASE_URL });
    await db.connect();
    try {
      const rows = await eventually(
        async () => {
          const { rows } = await db.query<{ generation_id: string; cost_usd: string }>(
            'SELECT generation_id, cost_usd::text AS cost_usd FROM billing.usage_records WHERE workspace_id = $1',
            [ws.workspaceId],
          );
          return rows.length >= answered.length && rows;
        },
        'the queued usage to be billed',
        30_000,
        200,
      );
      expect(rows.map((row) => row.generation_id).sort()).toEqual(answered.map((a) => a.generationId).sort());
      for (const a of answered) expect(new Money(rows.find((row) => row.generation_id === a.generationId)!.cost_usd).eq(a.cost)).toBe(true);
    } finally {
      await db.end();
    }
    const total = answered.reduce((sum, a) => sum.plus(a.cost), new Money(0));
    expect(new Money('1.00').minus(await balanceOf(ws.token)).eq(total)).toBe(true);
    await eventually(
      async () => new Money((await call('GET', `/v1/keys/${ws.keyId}`, { token: ws.token })).json.month_to_date_spend_usd).eq(total),
      "the key's spend",
      15_000,
    );
    // And the queue has room again.
    const after = await ws.client.chat.completions.create(ask);
    expect((after as unknown as { service?: object }).service).toBeDefined();
  }, 90_000);
});
