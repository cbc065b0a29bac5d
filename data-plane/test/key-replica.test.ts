import { create } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { Client } from '@connectrpc/connect';
import { KeyService, KeyStateSchema, RateLimitsSchema, SpendLimitStateSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { hasKeyBudget, KeyReplica, replicatedKey, sameRateLimits, sameSpendLimits } from '@switchboard/data-plane/key-replica';
import { readKeysConfig } from '@switchboard/keys/config';
import { prepareKeys } from '@switchboard/keys/prepare';
import { registerRoutes } from '@switchboard/keys/server';
import { generateFullKey } from '@switchboard/runtime/api-key-format';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService } from '@switchboard/runtime/in-process';
import { createLogger } from '@switchboard/runtime/log';
import { eventually } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The data plane's key replica (docs/money-path.md#replicas) against the keys handlers in this
 * process: a key created a moment ago is found on its first use, a revocation is seen at the next
 * poll, and keys nobody issued cost a bounded number of polls, however many arrive at once.
 */

const log = createLogger('data-plane', 'silent');
let service: InProcessService;
let handlers: ReturnType<typeof prepareKeys>;
let clientAs: ReturnType<InProcessService['serve']>;
let polls = 0;
let replica: KeyReplica;

const workspaceId = newId('org');
const developer = { caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role: 'developer' };

beforeAll(async () => {
  service = await inProcessService('keys', new URL('../../services/keys/dist/migrations/', import.meta.url));
  handlers = prepareKeys(service.runtime, readKeysConfig({}));
  clientAs = service.serve((router) => registerRoutes(router, handlers));
  const keys = clientAs(KeyService, { caller: 'data-plane' });
  // The data plane's client, with its ListKeyStates calls counted.
  const counted: Client<typeof KeyService> = {
    ...keys,
    listKeyStates: (request, options) => {
      polls += 1;
      return keys.listKeyStates(request, options);
    },
  };
  replica = new KeyReplica({ log, keys: counted, refreshMs: 60_000, maxStaleMs: 120_000 });
  await replica.start();
});

afterAll(async () => {
  await replica?.stop();
  await handlers?.states.stop();
  await service?.stop();
});

describe('the key replica', () => {
  it('finds a key created after its last poll on the key’s first use, and sees its revocation at the next poll', async () => {
    const created = await clientAs(KeyService, developer).createKey({ name: 'replicated', monthlySpendCapUsd: '5' });
    expect(await replica.lookup(created.fullKey)).toMatchObject({
      keyId: created.key!.keyId,
      workspaceId,
      status: 'active',
      capUsd: '5',
      routingPolicy: 'any',
    });
    await clientAs(KeyService, developer).revokeKey({ keyId: created.key!.keyId });
    replica.nudge();
    await eventually(async () => (await replica.lookup(created.fullKey))?.status === 'revoked', 'the revocation to reach the replica');
  });

  it('answers a key that is not well formed without a poll, and polls a bounded number of times for keys nobody issued', async () => {
    const before = polls;
    expect(await replica.lookup('sb_not_a_key')).toBeUndefined();
    expect(polls).toBe(before);
    // 200 well-formed keys nobody issued, at once: they wait for one or two polls, not 200.
    const unknown = await Promise.all(Array.from({ length: 200 }, () => replica.lookup(generateFullKey())));
    expect(unknown.every((key) => key === undefined)).toBe(true);
    expect(polls - before).toBeLessThanOrEqual(2);
  });
});

describe('a replicated key', () => {
  const state = (fields: Parameters<typeof create<typeof KeyStateSchema>>[1]) =>
    create(KeyStateSchema, { keyId: 'key_1', workspaceId: 'org_1', status: 'active', routingPolicy: 'cn-only', ...fields });

  it('carries what a request is decided on: scopes, expiry, allowed models, rate limits, budget and spend limits', () => {
    const key = replicatedKey(
      state({
        scopes: ['inference', 'read'],
        expiresAt: timestampFromMs(1_800_000_000_000),
        allowedModels: ['service/*', 'gpt-4o'],
        allModels: false,
        rateLimits: create(RateLimitsSchema, { requestsPerMinute: 20, maxConcurrent: 3 }),
        budgetId: 'key_0',
        monthlySpendCapUsd: '10',
        spendLimits: [create(SpendLimitStateSchema, { period: 'day', amountUsd: '1.50' })],
      }),
    );
    expect(key).toMatchObject({
      keyId: 'key_1',
      routingPolicy: 'cn-only',
      expiresAt: 1_800_000_000_000,
      rateLimits: { requests: 20, concurrency: 3 },
      budgetId: 'key_0',
      capUsd: '10',
      spendLimits: [{ period: 'day', amountUsd: '1.50' }],
    });
    expect([...key.scopes]).toEqual(['inference', 'read']);
    expect(['service/fast', 'gpt-4o', 'gpt-4o-mini'].map(key.allows)).toEqual([true, true, false]);
    expect(hasKeyBudget(key)).toBe(true);
  });

  it('allows every model with all_models, never expires without expires_at, and is its own budget by default', () => {
    const key = replicatedKey(state({ allModels: true }));
    expect(key).toMatchObject({ expiresAt: null, budgetId: 'key_1', rateLimits: {}, capUsd: null, spendLimits: [] });
    expect(key.allows('anything')).toBe(true);
    expect(key.scopes.size).toBe(0);
    expect(hasKeyBudget(key)).toBe(false);
    // An empty list without all_models allows nothing (never everything by mistake).
    expect(replicatedKey(state({ allModels: false })).allows('anything')).toBe(false);
  });

  it('tells a change of limits apart from a change of anything else', () => {
    const before = replicatedKey(state({ rateLimits: create(RateLimitsSchema, { requestsPerMinute: 20 }) }));
    expect(sameRateLimits(before, replicatedKey(state({ rateLimits: create(RateLimitsSchema, { requestsPerMinute: 20 }), routingPolicy: 'any' })))).toBe(true);
    expect(sameRateLimits(before, replicatedKey(state({ rateLimits: create(RateLimitsSchema, { requestsPerMinute: 21 }) })))).toBe(false);
    const day = (amountUsd: string) => replicatedKey(state({ spendLimits: [create(SpendLimitStateSchema, { period: 'day', amountUsd })] }));
    expect(sameSpendLimits(day('1'), day('1'))).toBe(true);
    expect(sameSpendLimits(day('1'), day('2'))).toBe(false);
  });
});
