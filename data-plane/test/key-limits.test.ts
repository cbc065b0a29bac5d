import { create, fromBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { Client } from '@connectrpc/connect';
import { UsageRecordSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { type KeyService, type KeyState, KeyStateSchema, RateLimitsSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import type { LeaseOwner } from '@switchboard/data-plane/budget-leases';
import type { CapFacts, RateFacts } from '@switchboard/data-plane/lease-owners';
import { generateFullKey, hashKey } from '@switchboard/runtime/api-key-format';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type InProcessFrontDoor, startInProcessFrontDoor } from './in-process-front-door.js';

/**
 * Keys II at the front door, in this process (docs/api/front-door.md#order-of-checks): the key
 * replica's expiry, scopes and allowed models decide before anything is leased, a service tier
 * routes only among the concrete models a key may use, the model list shows only those, every
 * answer of a key with rate limits carries its x-ratelimit-* headers, and the workspace's budget
 * refuses with its own scope. The owners are fakes; their real rules are e2e/data-plane/key-limits.test.ts's.
 */

const catalog = ModelCatalog.parse(
  JSON.stringify({
    regions: { overseas: { base_url: 'https://o.example/v1', api_key_env: 'KEY_LIMITS_O' } },
    models: [
      { id: 'fast-a', region: 'overseas', tiers: ['fast'], input_usd_per_1m: '0.1', output_usd_per_1m: '0.2' },
      { id: 'fast-b', region: 'overseas', tiers: ['fast'], input_usd_per_1m: '0.1', output_usd_per_1m: '0.2' },
      { id: 'balanced-a', region: 'overseas', tiers: ['balanced'], input_usd_per_1m: '1', output_usd_per_1m: '2' },
      { id: 'solo', region: 'overseas', tiers: [], input_usd_per_1m: '1', output_usd_per_1m: '2' },
    ],
  }),
);
const states: KeyState[] = [];
let version = 0n;
let frontDoor: InProcessFrontDoor;
let base: string;

function key(fields: Partial<Omit<KeyState, '$typeName'>>): string {
  const fullKey = generateFullKey();
  version += 1n;
  const keyId = `key_${states.length}`;
  states.push(
    create(KeyStateSchema, {
      keyHash: hashKey(fullKey),
      keyId,
      workspaceId: 'org_rich',
      status: 'active',
      routingPolicy: 'any',
      scopes: ['inference', 'read', 'manage'],
      allModels: true,
      budgetId: keyId,
      version,
      ...fields,
    }),
  );
  return fullKey;
}

/** How many times the workspace budgets' owner was asked for a lease. */
let workspaceLeases = 0;

/** The workspace budgets: org_poor's day limit is spent (a refusal leaves no live lease, as the keys service's); org_rich has a lease with room. */
const workspaceOwner: LeaseOwner<CapFacts> = {
  lease: async (workspaceId, request) => {
    workspaceLeases += 1;
    return workspaceId === 'org_poor'
      ? { leaseId: '', grantedUsd: '0', expiresAt: new Date(0), facts: { capUsd: '1', spendUsd: '1', scope: 'workspace', period: 'day' } }
      : { leaseId: 'lse_ws', grantedUsd: String(Number(request.usedUsd) + 100), expiresAt: new Date(Date.now() + 30_000), facts: { spendUsd: '0' } };
  },
  release: async () => {},
};

/** Rate leases of a generous limit (1000 of each), all of it granted to this replica; none left for the throttled key. */
const rateOwner: LeaseOwner<RateFacts> = {
  lease: async (keyId, request) => ({
    ...(keyId === throttledId ? { leaseId: '', grantedUsd: '0' } : { leaseId: 'rte_1', grantedUsd: String(Math.max(Number(request.usedUsd), 0) + 100) }),
    expiresAt: new Date((Math.floor(Date.now() / 60_000) + 1) * 60_000),
    facts: { limit: 1000, remaining: 900, resetsAt: new Date((Math.floor(Date.now() / 60_000) + 1) * 60_000) },
  }),
  release: async () => {},
};

const throttledId = 'key_0';
const throttled = key({ rateLimits: create(RateLimitsSchema, { requestsPerMinute: 1000 }) });
const expired = key({ expiresAt: timestampFromMs(Date.now() - 1000) });
const expiring = key({ expiresAt: timestampFromMs(Date.now() + 60 * 60_000) });
const readOnly = key({ scopes: ['read'] });
const noScopes = key({ scopes: [] });
const fastB = key({ allModels: false, allowedModels: ['fast-b'] });
const tiers = key({ allModels: false, allowedModels: ['service/*'] });
const solo = key({ allModels: false, allowedModels: ['sol*'] });
const limited = key({
  rateLimits: create(RateLimitsSchema, { requestsPerMinute: 1000, tokensPerMinute: 1000, maxConcurrent: 5 }),
  allModels: false,
  allowedModels: ['service/fast'],
});
const poor = key({ workspaceId: 'org_poor' });
const plain = key({});

beforeAll(async () => {
  const keys = {
    listKeyStates: async (request: { afterVersion: bigint }) => ({
      states: states.filter((state) => state.version > request.afterVersion),
      version,
      hasMore: false,
    }),
  } as unknown as Pick<Client<typeof KeyService>, 'listKeyStates'>;
  frontDoor = await startInProcessFrontDoor({ catalog, keys, workspaceOwner, rateOwner, demoRegions: new Set(['overseas']) });
  base = frontDoor.base;
});

afterAll(async () => {
  await frontDoor?.close();
});

/** The parts of an answer's body the tests read (an error, a completion's service block, a model list). */
interface Body {
  error: { code: string; [field: string]: unknown };
  service: { routed_model: string; generation_id: string };
  data: Array<{ id: string }>;
}

async function complete(fullKey: string, body: Record<string, unknown>) {
  const response = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${fullKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, ...body }),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Body };
}

async function models(fullKey: string) {
  const response = await fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${fullKey}` } });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Body };
}

describe('keys II at the front door', () => {
  it('refuses an expired key with 401 api_key_expired on both routes, by its own clock', async () => {
    for (const answer of [await complete(expired, { model: 'service/fast' }), await models(expired)]) {
      expect(answer.status).toBe(401);
      expect(answer.body.error).toMatchObject({ code: 'api_key_expired', type: 'authentication_error' });
    }
    expect((await complete(expiring, { model: 'service/fast' })).status).toBe(200);
  });

  it('refuses a key without the inference scope with 403 insufficient_scope, and a key state without scopes too', async () => {
    for (const fullKey of [readOnly, noScopes]) {
      for (const answer of [await complete(fullKey, { model: 'service/fast' }), await models(fullKey)]) {
        expect(answer.status).toBe(403);
        expect(answer.body.error).toMatchObject({ code: 'insufficient_scope', type: 'permission_error', metadata: { required_scope: 'inference' } });
      }
    }
    // The scope comes before the input: a malformed request of a read-only key is still a 403.
    expect((await complete(readOnly, { model: '' })).status).toBe(403);
  });

  it('routes a tier only among the concrete models a key may use, and refuses a model outside its list', async () => {
    for (let i = 0; i < 8; i++) {
      const answer = await complete(fastB, { model: 'service/fast' });
      expect(answer.status).toBe(200);
      expect(answer.body.service.routed_model).toBe('fast-b');
    }
    for (const model of ['service/balanced', 'fast-a', 'solo']) {
      const answer = await complete(fastB, { model });
      expect(answer.status).toBe(403);
      expect(answer.body.error).toMatchObject({ code: 'model_not_allowed', param: 'model', field: 'model' });
    }
    expect((await complete(fastB, { model: 'fast-b' })).status).toBe(200);
    // A model the catalog does not serve is a 400 before the allow-list.
    expect((await complete(fastB, { model: 'nowhere' })).body.error.code).toBe('model_unavailable');
    // Patterns naming the tiers allow them whole, and no concrete model.
    expect((await complete(tiers, { model: 'service/balanced' })).status).toBe(200);
    expect((await complete(tiers, { model: 'solo' })).status).toBe(403);
    // A list with no candidate of any tier allows no tier.
    expect((await complete(solo, { model: 'service/fast' })).body.error.code).toBe('model_not_allowed');
    expect((await complete(solo, { model: 'solo' })).status).toBe(200);
  });

  it('lists only the models a key may use', async () => {
    const ids = async (fullKey: string) => (await models(fullKey)).body.data.map((model) => model.id);
    expect(await ids(plain)).toEqual(['service/fast', 'service/balanced', 'fast-a', 'fast-b', 'balanced-a', 'solo']);
    expect(await ids(fastB)).toEqual(['service/fast', 'fast-b']);
    expect(await ids(tiers)).toEqual(['service/fast', 'service/balanced']);
    expect(await ids(solo)).toEqual(['solo']);
  });

  it('puts the x-ratelimit-* headers on every answer of a key with limits, refusals included, and none on a key without', async () => {
    const ok = await complete(limited, { model: 'service/fast' });
    expect(ok.status).toBe(200);
    const refusedModel = await complete(limited, { model: 'solo' });
    const badInput = await complete(limited, { model: 'service/fast', n: 99 });
    const list = await models(limited);
    expect([refusedModel.status, badInput.status, list.status]).toEqual([403, 400, 200]);
    for (const answer of [ok, refusedModel, badInput, list]) {
      expect(answer.headers.get('x-ratelimit-limit-requests')).toBe('1000');
      expect(answer.headers.get('x-ratelimit-limit-tokens')).toBe('1000');
      expect(answer.headers.get('x-ratelimit-reset-requests')).toMatch(/^\d+s$/);
      expect(answer.headers.get('x-ratelimit-reset-tokens')).toMatch(/^\d+s$/);
    }
    // After the success: the owner's 900 and the lease's unused part (100 less this request's one).
    expect(ok.headers.get('x-ratelimit-remaining-requests')).toBe('999');
    expect(Number(ok.headers.get('x-ratelimit-remaining-tokens'))).toBeLessThan(1000);
    // Concurrency has no header.
    expect([...ok.headers.keys()].filter((name) => name.includes('concurren'))).toEqual([]);
    // Over the limit: a 429 with its metadata, Retry-After and the headers, through the server.
    const over = await complete(throttled, { model: 'service/fast' });
    expect(over.status).toBe(429);
    const reset = Number(over.headers.get('retry-after'));
    expect(reset).toBeGreaterThanOrEqual(1);
    expect(over.body.error).toMatchObject({
      code: 'rate_limit_exceeded',
      type: 'rate_limit_error',
      metadata: { limit: 1000, scope: 'requests', reset_seconds: reset },
    });
    expect(over.headers.get('x-ratelimit-remaining-requests')).toBe('900');
    expect(over.headers.get('x-ratelimit-reset-requests')).toBe(`${reset}s`);
    expect(over.headers.get('x-ratelimit-limit-tokens')).toBeNull();
    const free = await complete(plain, { model: 'service/fast' });
    expect([...free.headers.keys()].filter((name) => name.startsWith('x-ratelimit'))).toEqual([]);
  });

  it('refuses a request the workspace’s budget cannot cover with 402 scope workspace, and names the workspace lease in the usage record', async () => {
    const refused = await complete(poor, { model: 'service/fast' });
    expect(refused.status).toBe(402);
    expect(refused.body.error).toMatchObject({
      code: 'spend_cap_exceeded',
      metadata: { scope: 'workspace', period: 'day', cap_usd: '1', spend_usd: '1', resets_at: null },
    });
    frontDoor.published.length = 0;
    const ok = await complete(plain, { model: 'service/fast' });
    expect(ok.status).toBe(200);
    const record = fromBinary(UsageRecordSchema, frontDoor.published[0]);
    expect(record).toMatchObject({ generationId: ok.body.service.generation_id, workspaceLeaseId: 'lse_ws' });
    expect(record.capLeaseId).toBeUndefined();
  });

  it('lists the models to a key its budget refuses: the list reserves nothing and asks no owner', async () => {
    expect((await complete(poor, { model: 'service/fast' })).status).toBe(402);
    // Each refusal is the owner's answer: nothing live is left here that a list could read.
    const asked = workspaceLeases;
    expect((await complete(poor, { model: 'service/fast' })).status).toBe(402);
    expect(workspaceLeases).toBe(asked + 1);
    const list = await models(poor);
    expect(list.status).toBe(200);
    expect(list.body.data.map((model) => model.id)).toContain('service/fast');
    expect(workspaceLeases).toBe(asked + 1);
  });
});
