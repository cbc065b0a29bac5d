import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { serviceNames } from '@switchboard/contracts/components';
import { type Mesh, repoRoot } from '@switchboard/runtime/dev/mesh';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { Money } from '@switchboard/runtime/money';
import { eventually } from '@switchboard/runtime/testing';
import { bootMesh, restClient, signUp } from '@switchboard/testkit/mesh';
import { catalogModel, type TestCatalog, writeTestCatalog } from '@switchboard/testkit/model-catalog-file';
import OpenAI from 'openai';
import type {
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientAt, Replica } from './replica.js';

/**
 * The money path's acceptance tests (issue 23, "Done when"; docs/money-path.md), through
 * the real path only: the official `openai` client at the gateway (or at a second data plane's
 * own port), REST for keys, balances and usage, Postgres for the usage rows and the database's
 * transaction counter, and the services' /metrics for the RPCs they served.
 *
 * - 64 concurrent requests against a key whose cap covers exactly 10 estimates, then against a
 *   workspace balance that covers exactly 10: exactly 10 go upstream, the others get their 402
 *   with its metadata, spend stays ≤ the cap and the balance ≥ 0; the same with two data-plane
 *   replicas sharing the cap and the balance.
 * - A revoked key is refused by every data plane within 1 s.
 * - 2,000 requests (streamed and not, both tiers, two keys, clients leaving mid-stream): the sum
 *   of the costs answered equals the balance's decrease and each key's spend, exactly, and every
 *   generation is billed once.
 * - The steady-state request path issues no RPC and no SQL: transactions and RPCs per request,
 *   background subtracted.
 *
 * The estimate a request reserves is recomputed here the way docs/money-path.md#leases states it:
 * prompt bound = the body's bytes (+2,000 per image part), output bound = max_tokens × n, at the
 * tier's list prices of the pricing file (runtime/pricing.json).
 */

// Model ids of this run only: routing scores of other runs in the same database stay apart.
const tag = randomBytes(3).toString('hex');
const FAST_A = `mp-fast-a-${tag}`;
const BAL_A = `mp-bal-a-${tag}`;
const FAST_CN = `mp-fast-cn-${tag}`;
const BAL_CN = `mp-bal-cn-${tag}`;

/** The tiers' list prices, USD per 1M tokens, from the pricing file billing and the data plane price with. */
const listPrices = (() => {
  const file = JSON.parse(readFileSync(path.join(repoRoot, 'runtime/pricing.json'), 'utf8')) as {
    tiers: Record<'fast' | 'balanced', { input_usd_per_1m: string; output_usd_per_1m: string }>;
  };
  return {
    fast: { input: new Money(file.tiers.fast.input_usd_per_1m), output: new Money(file.tiers.fast.output_usd_per_1m) },
    balanced: { input: new Money(file.tiers.balanced.input_usd_per_1m), output: new Money(file.tiers.balanced.output_usd_per_1m) },
  };
})();

type Tier = 'fast' | 'balanced';
type Body = { model: string; messages: ChatCompletionMessageParam[]; max_tokens: number; n?: number; stream?: boolean };
const userMessage = (content: string): ChatCompletionMessageParam => ({ role: 'user', content });

/** The upper-bound estimate the data plane reserves for `body`, sent as JSON.stringify(body) (what the openai client sends). */
function estimateOf(tier: Tier, body: Body): Money {
  const bytes = Buffer.byteLength(JSON.stringify(body));
  const images = body.messages.reduce(
    (sum, message) =>
      sum + (Array.isArray(message.content) ? message.content.filter((part) => (part as { type?: string } | null)?.type === 'image_url').length : 0),
    0,
  );
  const input = bytes + images * 2000;
  const output = body.max_tokens * (body.n ?? 1);
  const price = listPrices[tier];
  return price.input.mul(input).plus(price.output.mul(output)).div(1_000_000);
}

let mesh: Mesh;
let call: ReturnType<typeof restClient>;
let overseas: OpenAiUpstream;
let cn: OpenAiUpstream;
let catalog: TestCatalog | undefined;
let db: pg.Client;

beforeAll(async () => {
  [overseas, cn] = await Promise.all([OpenAiUpstream.start(), OpenAiUpstream.start()]);
  catalog = await writeTestCatalog({ overseas, cn }, [
    catalogModel(FAST_A, 'overseas', ['fast']),
    catalogModel(BAL_A, 'overseas', ['balanced']),
    catalogModel(FAST_CN, 'cn', ['fast']),
    catalogModel(BAL_CN, 'cn', ['balanced']),
  ]);
  mesh = await bootMesh({ ...catalog.env, ROUTING_SEED: '11' });
  call = restClient(mesh.gatewayUrl);
  db = new pg.Client({ connectionString: mesh.env.DATABASE_URL });
  await db.connect();
});

afterAll(async () => {
  await db?.end().catch(() => undefined);
  await mesh?.stop();
  await Promise.all([overseas?.close(), cn?.close()]);
  await catalog?.remove();
});

interface Key {
  keyId: string;
  fullKey: string;
  client: OpenAI;
}

interface Account extends Key {
  token: string;
  workspaceId: string;
}

async function createKey(token: string, key: { monthly_spend_cap_usd?: string; routing_policy?: string }): Promise<Key> {
  const created = await call('POST', '/v1/keys', { token, body: { name: 'money path', ...key } });
  expect(created.status, created.text).toBe(201);
  return { keyId: created.json.key.key_id, fullKey: created.json.full_key, client: clientAt(mesh.gatewayUrl, created.json.full_key) };
}

/** A new user (a new workspace, with the tests' opening credit of 1.00 once billing has it) and an API key of it. */
async function account(key: { monthly_spend_cap_usd?: string; routing_policy?: string } = {}): Promise<Account> {
  const user = await signUp(call);
  const created = await createKey(user.token, key);
  await eventually(async () => (await balanceOf(user.token)).eq('1.00'), 'the opening credit of the new workspace');
  return { token: user.token, workspaceId: user.workspaceId, ...created };
}

interface ServiceInfo {
  generation_id: string;
  tier: string;
  routed_model: string;
  region: string;
  cost_usd: string;
}

function serviceOf(body: unknown): ServiceInfo {
  const service = (body as { service?: ServiceInfo } | undefined)?.service;
  expect(service, JSON.stringify(body)).toBeDefined();
  return service!;
}

type ApiError = InstanceType<typeof OpenAI.APIError>;
const isAnswered = (err: unknown): err is ApiError => err instanceof OpenAI.APIError && typeof err.status === 'number';

const balanceOf = async (token: string) => {
  const response = await call('GET', '/v1/billing/balance', { token });
  expect(response.status, response.text).toBe(200);
  return new Money(response.json.balance_usd);
};
const spendOf = async (token: string, keyId: string) => {
  const response = await call('GET', `/v1/keys/${keyId}`, { token });
  expect(response.status, response.text).toBe(200);
  return new Money(response.json.month_to_date_spend_usd);
};
const byTier = async (token: string) => {
  const response = await call('GET', '/v1/billing/usage/by-tier', { token });
  expect(response.status, response.text).toBe(200);
  return response.json.by_tier as Record<string, { cost_usd: string; requests: number | string }>;
};
const sum = (amounts: Array<string | Money>) => amounts.reduce<Money>((total, amount) => total.plus(amount), new Money(0));
const upstreamCalls = () => overseas.requests.length + cn.requests.length;

/** The upstreams of a region stream slowly: `delayMs` between tokens (a non-streamed answer is not slowed). */
function slow(region: 'overseas' | 'cn', delayMs: number) {
  const [upstream, models] = region === 'overseas' ? [overseas, [FAST_A, BAL_A]] : [cn, [FAST_CN, BAL_CN]];
  for (const model of models) upstream.mode(model, { kind: 'slow', delayMs });
}

function resetModes() {
  for (const model of [FAST_A, BAL_A]) overseas.mode(model, { kind: 'ok' });
  for (const model of [FAST_CN, BAL_CN]) cn.mode(model, { kind: 'ok' });
}

/** Usage rows of a workspace in billing's table (schema billing, services/billing/migrations). */
async function usageRows(workspaceId: string) {
  const { rows } = await db.query<{ generation_id: string; key_id: string; tier: string; cost_usd: string; output_tokens: string }>(
    'SELECT generation_id, key_id, tier, cost_usd::text AS cost_usd, output_tokens::text AS output_tokens FROM billing.usage_records WHERE workspace_id = $1',
    [workspaceId],
  );
  return rows;
}

// ---------------------------------------------------------------------------------------------
// 64 at once against a budget of 10 estimates

/**
 * Time between two tokens of a slow stream, and its length: every stream lasts 8 × this, so a
 * reservation is settled (and its room given back) no sooner than that after the burst starts.
 */
const burstTokenDelayMs = 1000;
const burstStreamMs = 8 * burstTokenDelayMs;

interface BurstOutcome {
  /** performance.now() when the decision reached the client: a stream's headers, or the refusal. */
  decidedAt: number;
  service?: ServiceInfo;
  refusal?: ApiError;
}

/** One streamed request read to its end: its service facts, or the error it was refused with. */
async function streamOnce(client: OpenAI, body: ChatCompletionCreateParamsStreaming): Promise<BurstOutcome> {
  try {
    const { data: stream, response } = await client.chat.completions.create(body).withResponse();
    const decidedAt = performance.now();
    let last: unknown;
    for await (const chunk of stream) last = chunk;
    const service = serviceOf(last);
    expect(response.headers.get('x-service-generation-id')).toBe(service.generation_id);
    return { decidedAt, service };
  } catch (err) {
    if (isAnswered(err)) return { decidedAt: performance.now(), refusal: err };
    throw err;
  }
}

/**
 * 64 streamed requests at once, spread over `clients` in turn, against upstreams slowed so that no
 * stream can end (and no reservation can be settled) before every request has been decided; that
 * precondition is checked, not assumed: the burst fails if this machine was too slow for it.
 */
async function burst(clients: OpenAI[], body: ChatCompletionCreateParamsStreaming) {
  const before = upstreamCalls();
  const started = performance.now();
  const outcomes = await Promise.all(Array.from({ length: 64 }, (_, i) => streamOnce(clients[i % clients.length], body)));
  const lastDecisionMs = Math.max(...outcomes.map((outcome) => outcome.decidedAt)) - started;
  expect(lastDecisionMs, `all 64 decided within ${burstStreamMs} ms, before any stream could end and settle`).toBeLessThan(burstStreamMs);
  const served = outcomes.flatMap((outcome) => (outcome.service ? [outcome.service] : []));
  const refused = outcomes.flatMap((outcome) => (outcome.refusal ? [outcome.refusal] : []));
  return { served, refused, upstream: upstreamCalls() - before };
}

const capBody: ChatCompletionCreateParamsStreaming & Body = {
  model: 'service/fast',
  messages: [userMessage('Say hi')],
  max_tokens: 8,
  stream: true,
};
const capEstimate = estimateOf('fast', capBody);
/** Covers 10 estimates, not 11. */
const capOfTen = capEstimate.mul('10.5').toDecimalPlaces(12, Money.ROUND_DOWN);

/** A balanced request whose estimate fits 10 times in the tests' opening credit of 1.00 and not 11 times (a large max_tokens). */
const balanceBody: ChatCompletionCreateParamsStreaming & Body = (() => {
  const body = (maxTokens: number) => ({
    model: 'service/balanced',
    messages: [userMessage('Say hi')],
    max_tokens: maxTokens,
    stream: true as const,
  });
  const { input, output } = listPrices.balanced;
  const bytes = Buffer.byteLength(JSON.stringify(body(10_000)));
  const target = new Money('1.00').div('10.5').mul(1_000_000);
  return body(target.minus(input.mul(bytes)).div(output).floor().toNumber());
})();
const balanceEstimate = estimateOf('balanced', balanceBody);

function expectCapBudgetShape() {
  expect(capEstimate.mul(10).lte(capOfTen) && capEstimate.mul(11).gt(capOfTen), `cap ${capOfTen} for estimates of ${capEstimate}`).toBe(true);
}

function expectBalanceBudgetShape() {
  expect(balanceEstimate.mul(10).lte('1.00') && balanceEstimate.mul(11).gt('1.00'), `estimate ${balanceEstimate} (max_tokens ${balanceBody.max_tokens})`).toBe(
    true,
  );
}

/** The cap guarantee for one burst: 10 upstream, 54 × 402 spend_cap_exceeded with its metadata, spend ≤ cap once settled. */
async function expectCapHeld(ws: Account, outcome: Awaited<ReturnType<typeof burst>>) {
  const { served, refused, upstream } = outcome;
  expect(
    refused.map((err) => [err.status, err.code]),
    refused.map((err) => err.message).join(' | '),
  ).toEqual(Array(54).fill([402, 'spend_cap_exceeded']));
  expect(served.length).toBe(10);
  expect(upstream).toBe(10);
  for (const err of refused) {
    expect(err.error).toMatchObject({ code: 'spend_cap_exceeded', type: 'insufficient_quota', metadata: { scope: 'key' } });
    const metadata = (err.error as { metadata: { cap_usd: string; spend_usd: string; resets_at: string } }).metadata;
    expect(new Money(metadata.cap_usd).eq(capOfTen), metadata.cap_usd).toBe(true);
    expect(new Money(metadata.spend_usd).lte(capOfTen), metadata.spend_usd).toBe(true);
    expect(Number.isNaN(Date.parse(metadata.resets_at)), metadata.resets_at).toBe(false);
    expect(JSON.stringify(err.error)).not.toContain(ws.fullKey);
  }
  const settled = sum(served.map((service) => service.cost_usd));
  expect(settled.lte(capOfTen)).toBe(true);
  await eventually(async () => (await spendOf(ws.token, ws.keyId)).eq(settled), `month-to-date spend ${settled.toFixed()}`, 15_000);
  expect((await spendOf(ws.token, ws.keyId)).lte(capOfTen)).toBe(true);
  expect(new Money('1.00').minus(await balanceOf(ws.token)).eq(settled)).toBe(true);
  expect((await usageRows(ws.workspaceId)).length).toBe(10);
}

/** The balance guarantee for one burst: 10 upstream, 54 × 402 insufficient_balance {balance_usd, required_usd}, never below zero. */
async function expectBalanceHeld(ws: Account, outcome: Awaited<ReturnType<typeof burst>>) {
  const { served, refused, upstream } = outcome;
  expect(
    refused.map((err) => [err.status, err.code]),
    refused.map((err) => err.message).join(' | '),
  ).toEqual(Array(54).fill([402, 'insufficient_balance']));
  expect(served.length).toBe(10);
  expect(upstream).toBe(10);
  for (const err of refused) {
    expect(err.error).toMatchObject({ code: 'insufficient_balance', metadata: { balance_usd: expect.any(String), required_usd: expect.any(String) } });
    const metadata = (err.error as { metadata: { balance_usd: string; required_usd: string } }).metadata;
    // Nothing was settled yet when they were decided: the balance is the opening credit, and the request needs its estimate.
    expect(new Money(metadata.balance_usd).eq('1.00'), metadata.balance_usd).toBe(true);
    expect(new Money(metadata.required_usd).eq(balanceEstimate), `${metadata.required_usd} ≠ ${balanceEstimate}`).toBe(true);
  }
  const settled = sum(served.map((service) => service.cost_usd));
  const balance = await balanceOf(ws.token);
  expect(balance.eq(new Money('1.00').minus(settled)), `balance ${balance} after ${settled}`).toBe(true);
  expect(balance.gte(0)).toBe(true);
  const { rows } = await db.query<{ balance_usd: string }>('SELECT balance_usd::text AS balance_usd FROM billing.accounts WHERE workspace_id = $1', [
    ws.workspaceId,
  ]);
  expect(new Money(rows[0].balance_usd).gte(0)).toBe(true);
  expect((await usageRows(ws.workspaceId)).length).toBe(10);
}

describe('a budget of 10 estimates and 64 requests at once', () => {
  it('a key cap: exactly 10 go upstream, 54 get 402 spend_cap_exceeded, spend stays within the cap', async () => {
    expectCapBudgetShape();
    const ws = await account({ monthly_spend_cap_usd: capOfTen.toFixed(), routing_policy: 'overseas-only' });
    slow('overseas', burstTokenDelayMs);
    try {
      await expectCapHeld(ws, await burst([ws.client], capBody));
    } finally {
      resetModes();
    }
  }, 60_000);

  it('a workspace balance: exactly 10 go upstream, 54 get 402 insufficient_balance, the balance never goes below zero', async () => {
    expectBalanceBudgetShape();
    const ws = await account({ routing_policy: 'overseas-only' });
    slow('overseas', burstTokenDelayMs);
    try {
      await expectBalanceHeld(ws, await burst([ws.client], balanceBody));
    } finally {
      resetModes();
    }
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------
// A second data plane

describe('two data-plane replicas sharing one cap and one balance', () => {
  let second: Replica;

  beforeAll(async () => {
    second = await Replica.start(mesh.env);
    // Warm: the second replica answers a request of another account (its routing scores, its connections).
    const warm = await account({ routing_policy: 'overseas-only' });
    const answered = await second.client(warm.fullKey).chat.completions.create({ ...capBody, stream: false });
    serviceOf(answered);
  });

  afterAll(async () => {
    await second?.stop();
  });

  it('a key cap of 10 estimates, 32 requests at each replica: exactly 10 go upstream, spend stays within the cap', async () => {
    expectCapBudgetShape();
    const ws = await account({ monthly_spend_cap_usd: capOfTen.toFixed(), routing_policy: 'overseas-only' });
    slow('overseas', burstTokenDelayMs);
    try {
      await expectCapHeld(ws, await burst([ws.client, second.client(ws.fullKey)], capBody));
    } finally {
      resetModes();
    }
  }, 60_000);

  it('a balance of 10 estimates, 32 requests at each replica: exactly 10 go upstream, the balance never goes below zero', async () => {
    expectBalanceBudgetShape();
    const ws = await account({ routing_policy: 'overseas-only' });
    slow('overseas', burstTokenDelayMs);
    try {
      await expectBalanceHeld(ws, await burst([ws.client, second.client(ws.fullKey)], balanceBody));
    } finally {
      resetModes();
    }
  }, 60_000);

  it('a revoked key is refused with 401 api_key_revoked by both replicas within 1 s', async () => {
    const ws = await account();
    const ask: ChatCompletionCreateParamsNonStreaming = { model: 'service/fast', messages: [userMessage('Say hi')], max_tokens: 8 };
    const replicas = [ws.client, second.client(ws.fullKey)];
    // Both replicas hold the key (and its leases) before it is revoked.
    for (const client of replicas) serviceOf(await client.chat.completions.create(ask));
    expect((await call('DELETE', `/v1/keys/${ws.keyId}`, { token: ws.token })).status).toBe(200);
    const revokedAt = performance.now();
    const refusedAfter = await Promise.all(
      replicas.map(async (client) => {
        const refused = await eventually(
          async () => {
            const outcome = await client.chat.completions.create(ask).then(
              () => undefined,
              (err: unknown) => err,
            );
            return outcome instanceof OpenAI.AuthenticationError && outcome;
          },
          'the revoked key to be refused',
          1000,
          10,
        );
        expect(refused).toMatchObject({ status: 401, code: 'api_key_revoked' });
        return performance.now() - revokedAt;
      }),
    );
    for (const ms of refusedAfter) expect(ms).toBeLessThan(1000);
    // And it stays refused, before anything goes upstream.
    const before = upstreamCalls();
    for (const client of replicas) await expect(client.chat.completions.create(ask)).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    expect(upstreamCalls()).toBe(before);
  }, 30_000);
});

// ---------------------------------------------------------------------------------------------
// 2,000 requests: answered costs = balance decrease = each key's spend, exactly

/** The ten kinds of request, in turn: key 0 non-streamed and streamed, both tiers; key 1 the same, and clients that leave mid-stream. */
const kinds: Array<{ key: 0 | 1; tier: Tier; stream: boolean; disconnected: boolean }> = [
  { key: 0, tier: 'fast', stream: false, disconnected: false },
  { key: 0, tier: 'balanced', stream: false, disconnected: false },
  { key: 0, tier: 'fast', stream: true, disconnected: false },
  { key: 0, tier: 'balanced', stream: true, disconnected: false },
  { key: 0, tier: 'fast', stream: false, disconnected: false },
  { key: 0, tier: 'balanced', stream: true, disconnected: false },
  { key: 1, tier: 'fast', stream: false, disconnected: false },
  { key: 1, tier: 'balanced', stream: true, disconnected: false },
  { key: 1, tier: 'fast', stream: true, disconnected: true },
  { key: 1, tier: 'balanced', stream: true, disconnected: true },
];

interface Sent {
  key: 0 | 1;
  tier: Tier;
  stream: boolean;
  /** The client left after the first chunk: the cost was never shown to it. */
  disconnected: boolean;
  generationId: string;
  /** The cost answered (`service.cost_usd`), or undefined for a client that left. */
  cost?: string;
}

/** Runs `count` tasks with `inFlight` at a time. */
async function pool<T>(count: number, inFlight: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) {
        const i = next++;
        results[i] = await task(i);
      }
    }),
  );
  return results;
}

describe('2,000 requests, settled exactly', () => {
  it('the sum of answered cost_usd equals the balance decrease and each key spend, and every generation is billed once', async () => {
    // Key 0: overseas-only, no cap. Key 1: cn-only, with a cap (its cap leases at work), where streams are slowed.
    const ws = await account({ routing_policy: 'overseas-only' });
    const capped = await createKey(ws.token, { monthly_spend_cap_usd: '5.00', routing_policy: 'cn-only' });
    const keys = [ws, capped];
    // Key 1's streams last 8 × 50 ms: a client leaving after the first chunk leaves mid-stream.
    slow('cn', 50);
    const balanceBefore = await balanceOf(ws.token);
    const total = 2000;
    let sent: Sent[];
    try {
      sent = await pool(total, 32, async (i): Promise<Sent> => {
        const { key, tier, stream, disconnected } = kinds[i % kinds.length];
        const client = keys[key].client;
        const body = { model: `service/${tier}`, messages: [userMessage(`Say hi ${i}`)], max_tokens: 8 };
        if (!stream) {
          const { data, response } = await client.chat.completions.create(body).withResponse();
          const service = serviceOf(data);
          expect(response.headers.get('x-service-generation-id')).toBe(service.generation_id);
          expect(service.tier).toBe(tier);
          return { key, tier, stream, disconnected, generationId: service.generation_id, cost: service.cost_usd };
        }
        const controller = new AbortController();
        const { data: chunks, response } = await client.chat.completions.create({ ...body, stream: true }, { signal: controller.signal }).withResponse();
        const generationId = response.headers.get('x-service-generation-id')!;
        expect(generationId).toMatch(/^gen_/);
        let last: unknown;
        for await (const chunk of chunks) {
          last = chunk;
          if (disconnected) {
            controller.abort();
            break;
          }
        }
        if (disconnected) return { key, tier, stream, disconnected, generationId };
        const service = serviceOf(last);
        expect(service.generation_id).toBe(generationId);
        expect(service.tier).toBe(tier);
        return { key, tier, stream, disconnected, generationId, cost: service.cost_usd };
      });
    } finally {
      resetModes();
    }
    expect(new Set(sent.map((s) => s.generationId)).size).toBe(total);

    // Every generation billed once: one row each, no other row.
    const rows = await eventually(
      async () => {
        const found = await usageRows(ws.workspaceId);
        return found.length >= total && found;
      },
      `${total} usage rows`,
      60_000,
      250,
    );
    const { rows: repeated } = await db.query(
      'SELECT generation_id, count(*)::int AS n FROM billing.usage_records WHERE workspace_id = $1 GROUP BY 1 HAVING count(*) > 1',
      [ws.workspaceId],
    );
    expect(repeated).toEqual([]);
    expect(rows.length).toBe(total);
    const rowOf = new Map(rows.map((row) => [row.generation_id, row]));
    expect(sent.filter((s) => !rowOf.has(s.generationId)).map((s) => s.generationId)).toEqual([]);

    // Each answered cost is the cost billed, exactly; a client that left is billed too (what was produced).
    const answered = sent.filter((s) => s.cost !== undefined);
    expect(answered.length).toBe(total - sent.filter((s) => s.disconnected).length);
    for (const s of answered) {
      const row = rowOf.get(s.generationId)!;
      expect(new Money(row.cost_usd).eq(s.cost!), `${s.generationId}: billed ${row.cost_usd}, answered ${s.cost}`).toBe(true);
      expect(row.tier).toBe(s.tier);
      expect(row.key_id).toBe(keys[s.key].keyId);
    }
    // A client that left is billed for what the upstream produced before the data plane saw it go: at most the 8 tokens of an answer.
    const leftTokens: Record<string, number> = {};
    for (const s of sent.filter((x) => x.disconnected)) {
      const row = rowOf.get(s.generationId)!;
      expect(row.tier).toBe(s.tier);
      expect(Number(row.output_tokens), s.generationId).toBeLessThanOrEqual(8);
      leftTokens[row.output_tokens] = (leftTokens[row.output_tokens] ?? 0) + 1;
    }
    console.log(`output tokens billed for the clients that left mid-stream (tokens: requests): ${JSON.stringify(leftTokens)}`);
    const billed = sum(rows.map((row) => row.cost_usd));
    const answeredSum = sum(answered.map((s) => s.cost!));
    const leftSum = sum(sent.filter((s) => s.disconnected).map((s) => rowOf.get(s.generationId)!.cost_usd));
    expect(answeredSum.plus(leftSum).eq(billed)).toBe(true);

    // The balance moved by exactly that; the by-tier report agrees.
    const decrease = balanceBefore.minus(await balanceOf(ws.token));
    expect(decrease.eq(billed), `balance decrease ${decrease}, billed ${billed} (answered ${answeredSum} + left ${leftSum})`).toBe(true);
    const tiers = await byTier(ws.token);
    for (const tier of ['fast', 'balanced'] as const) {
      const ofTier = rows.filter((row) => row.tier === tier);
      expect(Number(tiers[tier].requests), tier).toBe(sent.filter((s) => s.tier === tier).length);
      expect(new Money(tiers[tier].cost_usd).eq(sum(ofTier.map((row) => row.cost_usd))), `${tier}: ${tiers[tier].cost_usd}`).toBe(true);
    }
    expect(new Money(tiers.fast.cost_usd).plus(tiers.balanced.cost_usd).eq(billed)).toBe(true);

    // Each key's month-to-date spend: exactly its share (all answered for key 0).
    const keySum = (key: 0 | 1) => sum(sent.filter((s) => s.key === key).map((s) => rowOf.get(s.generationId)!.cost_usd));
    expect(keySum(0).eq(sum(answered.filter((s) => s.key === 0).map((s) => s.cost!)))).toBe(true);
    for (const key of [0, 1] as const) {
      const expected = keySum(key);
      await eventually(async () => (await spendOf(ws.token, keys[key].keyId)).eq(expected), `key ${key} spend ${expected.toFixed()}`, 30_000, 250);
    }
    expect(keySum(0).plus(keySum(1)).eq(decrease)).toBe(true);
  }, 600_000);
});

// ---------------------------------------------------------------------------------------------
// The steady state: no RPC and no SQL per request

/**
 * A backend that goes idle flushes its statistics to pg_stat_database within 10 s
 * (PGSTAT_IDLE_INTERVAL; a busy one every second): the counter is read this long after a window's
 * work ended. There is no event to wait for: this is a measuring window, not a synchronisation.
 */
const statsFlushMs = 10_500;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/**
 * Requests measured. The background (key-state polls, routing refreshes, lease keep-alives,
 * outbox polls, housekeeping) is measured over as long a window and subtracted; its jitter between
 * two windows, a few dozen transactions, must stay well under 0.1 per request.
 */
const measuredRequests = 2000;
/** The window without requests is as long as the one with them, up to this (its rate is what is subtracted). */
const maxIdleWindowMs = 30_000;

interface SqlReading {
  at: number;
  transactions: number;
  /** Rows inserted, updated and deleted so far, by table (pg_stat_user_tables): where the transactions went. */
  writes: Map<string, number>;
  /** Statements this test issued on its own connection so far (each is a transaction the counter sees). */
  mine: number;
}

interface RpcReading {
  at: number;
  rpcs: Map<string, number>;
  /** Settlement transactions so far: batches of the services' consumers and outbox relays (runtime/src/durable-consumer.ts, outbox.ts). */
  settlement: number;
}

describe('the steady state', () => {
  let statements = 0;
  const query = <R extends pg.QueryResultRow>(sql: string, params?: unknown[]) => {
    statements++;
    return db.query<R>(sql, params);
  };

  async function sqlReading(): Promise<SqlReading> {
    // One simple query, one transaction: the snapshot cleared, then the database's counters.
    const results = (await query(
      `SELECT pg_stat_clear_snapshot();
       SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = current_database();
       SELECT schemaname || '.' || relname AS name, (n_tup_ins + n_tup_upd + n_tup_del)::text AS n FROM pg_stat_user_tables`,
    )) as unknown as Array<pg.QueryResult<{ name: string; n: string }>>;
    return {
      at: performance.now(),
      transactions: Number(results[1].rows[0].n),
      writes: new Map(results[2].rows.map((row) => [row.name, Number(row.n)])),
      mine: statements,
    };
  }

  /** RPCs served so far by every service, by service and method (runtime/src/server.ts: rpc_server_duration_seconds). */
  async function rpcReading(): Promise<RpcReading> {
    const at = performance.now();
    const rpcs = new Map<string, number>();
    let settlement = 0;
    for (const service of serviceNames) {
      const text = await (await fetch(mesh.metricsUrls[service], { signal: AbortSignal.timeout(5000) })).text();
      for (const line of text.split('\n')) {
        const batches = /^(?:consumer_batches_total|outbox_relay_batches_total)(?:\{[^}]*\})? (\S+)$/.exec(line);
        if (batches) settlement += Number(batches[1]);
        const match = /^rpc_server_duration_seconds_count\{([^}]*)\} (\S+)$/.exec(line);
        if (!match) continue;
        const rpc = `${service} ${/rpc="([^"]*)"/.exec(match[1])?.[1] ?? '?'}`;
        rpcs.set(rpc, (rpcs.get(rpc) ?? 0) + Number(match[2]));
      }
    }
    return { at, rpcs, settlement };
  }

  const transactionsBetween = (from: SqlReading, to: SqlReading) => to.transactions - from.transactions - (to.mine - from.mine);
  const writesBetween = (from: SqlReading, to: SqlReading) =>
    [...to.writes]
      .map(([table, n]) => [table, n - (from.writes.get(table) ?? 0)] as const)
      .filter(([, n]) => n > 0)
      .sort((a, b) => b[1] - a[1])
      .map(([table, n]) => `${table} ${n}`)
      .join(', ');
  const rpcsBetween = (from: RpcReading, to: RpcReading) => [...to.rpcs].reduce((total, [rpc, n]) => total + n - (from.rpcs.get(rpc) ?? 0), 0);
  const rpcList = (from: RpcReading, to: RpcReading) =>
    [...to.rpcs]
      .map(([rpc, n]) => [rpc, n - (from.rpcs.get(rpc) ?? 0)] as const)
      .filter(([, n]) => n > 0)
      .map(([rpc, n]) => `${rpc} ${n}`)
      .join(', ');

  it(`${measuredRequests} requests after a warm-up: no SQL and no RPC of their own (< 0.1 transactions and < 0.05 RPCs per request beside the background and the batched settlement)`, async () => {
    const ws = await account({ monthly_spend_cap_usd: '50.00' });
    const ask: ChatCompletionCreateParamsNonStreaming = { model: 'service/fast', messages: [userMessage('Say hi')], max_tokens: 8 };
    const send = (count: number) => pool(count, 64, async () => serviceOf(await ws.client.chat.completions.create(ask)).cost_usd);
    const settled = async (count: number, costs: string[]) => {
      const expected = sum(costs);
      await eventually(
        async () => {
          const { rows } = await query<{ n: number; spend: string | null }>(
            `SELECT (SELECT count(*)::int FROM billing.usage_records WHERE workspace_id = $1) AS n,
                    (SELECT sum(spend_usd)::text FROM keys.key_monthly_spend WHERE key_id = $2) AS spend`,
            [ws.workspaceId, ws.keyId],
          );
          return rows[0].n === count && rows[0].spend !== null && new Money(rows[0].spend).eq(expected);
        },
        `${count} requests billed and in the key's spend`,
        120_000,
        500,
      );
    };

    // Warm-up: the key in the replica, its leases sized for 64 in flight, connections open.
    const warm = await send(200);
    await settled(warm.length, warm);
    await pause(statsFlushMs);

    const sqlStart = await sqlReading();
    const rpcStart = await rpcReading();
    const measured = await send(measuredRequests);
    // RPCs are counted as they are served: over the requests' own time, then over as long a time without requests.
    const rpcLoaded = await rpcReading();
    await pause(Math.min(rpcLoaded.at - rpcStart.at, maxIdleWindowMs));
    const rpcIdle = await rpcReading();
    // Transactions include the settlement the requests caused (billing's and keys' batches, the outbox), once flushed.
    await settled(warm.length + measured.length, [...warm, ...measured]);
    await pause(statsFlushMs);
    const sqlLoaded = await sqlReading();
    // The three scrapes of /metrics in the load window ran SQL (the outbox and queue gauges): as many in this one.
    const settledLoaded = await rpcReading();
    for (let i = 0; i < 2; i++) await rpcReading();
    await pause(Math.min(sqlLoaded.at - sqlStart.at, maxIdleWindowMs) - (performance.now() - sqlLoaded.at));
    const sqlIdle = await sqlReading();
    const settledIdle = await rpcReading();

    const sqlRatio = (sqlLoaded.at - sqlStart.at) / (sqlIdle.at - sqlLoaded.at);
    const loadTransactions = transactionsBetween(sqlStart, sqlLoaded);
    const idleTransactions = transactionsBetween(sqlLoaded, sqlIdle);
    // Settlement runs in batches after the answers (docs/money-path.md#usage): its transactions are
    // counted by the services and set apart; what is left is the requests' own, which must be none.
    const loadSettlement = settledLoaded.settlement - rpcStart.settlement;
    const idleSettlement = settledIdle.settlement - settledLoaded.settlement;
    const transactionsPerRequest = (loadTransactions - loadSettlement - (idleTransactions - idleSettlement) * sqlRatio) / measuredRequests;
    const settlementPerRequest = loadSettlement / measuredRequests;
    const rpcRatio = (rpcLoaded.at - rpcStart.at) / (rpcIdle.at - rpcLoaded.at);
    const rpcsPerRequest = (rpcsBetween(rpcStart, rpcLoaded) - rpcsBetween(rpcLoaded, rpcIdle) * rpcRatio) / measuredRequests;
    const detail = [
      `transactions: ${loadTransactions} in the load window (${Math.round(sqlLoaded.at - sqlStart.at)} ms, settlement and flush included), ${idleTransactions} in as long a window without requests`,
      `settlement batches: ${loadSettlement} in the load window (${settlementPerRequest.toFixed(3)} per request), ${idleSettlement} without requests`,
      `transactions of the requests themselves: ${transactionsPerRequest.toFixed(3)} per request`,
      `rows written in the load window: ${writesBetween(sqlStart, sqlLoaded)}`,
      `rows written without requests: ${writesBetween(sqlLoaded, sqlIdle)}`,
      `RPCs during the requests (${Math.round(rpcLoaded.at - rpcStart.at)} ms): ${rpcList(rpcStart, rpcLoaded)}`,
      `RPCs in as long a time without requests: ${rpcList(rpcLoaded, rpcIdle)}`,
      `${rpcsPerRequest.toFixed(3)} RPCs per request`,
    ].join('\n');
    console.log(detail);
    expect(transactionsPerRequest, detail).toBeLessThan(0.1);
    // Settled in batches: fewer transactions than requests (at 2,000 req/s a batch holds far more).
    expect(settlementPerRequest, detail).toBeLessThan(1);
    expect(rpcsPerRequest, detail).toBeLessThan(0.05);
    // The calls a request used to make are gone altogether.
    for (const rpc of ['keys KeyService/AuthorizeKey', 'conversations RoutingService/RouteModel', 'billing UsageService/RecordUsage']) {
      expect((rpcLoaded.rpcs.get(rpc) ?? 0) - (rpcStart.rpcs.get(rpc) ?? 0), `${rpc}\n${detail}`).toBe(0);
    }
  }, 600_000);
});
