import { fromJson, type JsonObject, type JsonValue } from '@bufbuild/protobuf';
import { timestampDate, ValueSchema } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError } from '@connectrpc/connect';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { KeyAuthorizer } from '@switchboard/keys/authorization';
import { readKeysConfig } from '@switchboard/keys/config';
import { announceExpiredKeys } from '@switchboard/keys/housekeeping';
import { prepareKeys } from '@switchboard/keys/prepare';
import { registerRoutes } from '@switchboard/keys/server';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService, refusalOf } from '@switchboard/runtime/in-process';
import type { MeshClaims } from '@switchboard/runtime/mesh-token';
import { parseRfc3339 } from '@switchboard/runtime/rfc3339';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Keys II in this process (docs/api/keys.md#scopes … #introspection): the new settings of a key on
 * creation and PATCH, each bad input named, the scopes an API key may grant, budgets, alert
 * thresholds, rotation, GET /v1/key, expiry in AuthenticateKey and AuthorizeKey, the key states
 * of the data plane, and the key.expired sweep.
 */

let service: InProcessService;
let handlers: ReturnType<typeof prepareKeys>;
let clientAs: ReturnType<InProcessService['serve']>;

const workspaceId = newId('org');
const ownerId = newId('usr');
const member = (role = 'owner', userId = ownerId): MeshClaims => ({ caller: 'gateway', principalId: userId, principalType: 'user', workspaceId, role });
/** An API key of the owner acting with `scopes`. */
const keyPrincipal = (scopes: string[] | undefined, keyId = newId('key')): MeshClaims => ({ ...member(), principalType: 'key', keyId, scopes });
const owner = () => clientAs(KeyService, member());
const v = (json: JsonValue) => fromJson(ValueSchema, json);

/** The public error of a refused call, with its metadata. */
async function errorOf(call: Promise<unknown>): Promise<{ code: Code; error: string; field: string; metadata?: JsonObject }> {
  try {
    await call;
  } catch (err) {
    if (!(err instanceof ConnectError)) throw err;
    const detail = err.findDetails(ErrorDetailSchema)[0];
    return { code: err.code, error: detail?.code ?? '', field: detail?.field ?? '', metadata: detail?.metadata };
  }
  throw new Error('expected the call to be refused, but it succeeded');
}

async function expectField(call: Promise<unknown>, field: string): Promise<void> {
  expect(await refusalOf(call), field).toEqual({ code: Code.InvalidArgument, error: 'invalid_request', field });
}

/** The data of the events of `type` about `keyId`, oldest first. */
async function eventsOf(type: string, keyId: string): Promise<JsonObject[]> {
  const rows = await service.runtime.db('outbox').whereRaw("payload->>'type' = ? AND payload->'data'->>'key_id' = ?", [type, keyId]).orderBy('id');
  return rows.map((row: { payload: { data: JsonObject } }) => row.payload.data);
}

/** A key's rate limits as [requests_per_minute, tokens_per_minute, max_concurrent], null for none. */
const limitsOf = (limits?: { requestsPerMinute?: number; tokensPerMinute?: number; maxConcurrent?: number }) => [
  limits?.requestsPerMinute ?? null,
  limits?.tokensPerMinute ?? null,
  limits?.maxConcurrent ?? null,
];

const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();

beforeAll(async () => {
  service = await inProcessService('keys', new URL('../dist/migrations/', import.meta.url));
  handlers = prepareKeys(service.runtime, readKeysConfig({}));
  clientAs = service.serve((router) => registerRoutes(router, handlers));
});

afterAll(async () => {
  await handlers?.states.stop();
  await service?.stop();
});

describe('creating a key with the Keys II settings', () => {
  it('defaults: every scope, no expiry, every model, no rate limits, no rotation, no thresholds', async () => {
    const { key } = await owner().createKey({ name: 'plain' });
    expect(key).toMatchObject({ scopes: ['inference', 'read', 'manage'], alertThresholdsPct: [], spendLimits: [] });
    expect(key!.expiresAt).toBeUndefined();
    expect(key!.allowedModels).toBeUndefined();
    expect(key!.rotatedFrom).toBeUndefined();
    expect(limitsOf(key!.rateLimits)).toEqual([null, null, null]);
  });

  it('stores every setting as given: scopes in canonical order, trimmed patterns, the limits', async () => {
    const expiresAt = inAnHour();
    const { key } = await owner().createKey({
      name: 'full',
      scopes: v(['manage', 'inference']),
      expiresAt: v(expiresAt),
      allowedModels: v([' service/* ', 'acc-large']),
      rateLimits: v({ requests_per_minute: 60, tokens_per_minute: null, max_concurrent: 3 }),
      spendLimits: [
        { period: 'day', amountUsd: v('5.00') },
        { period: 'month', amountUsd: v('100') },
      ],
    });
    expect(key).toMatchObject({ scopes: ['inference', 'manage'], monthlySpendCapUsd: '100' });
    expect(timestampDate(key!.expiresAt!).toISOString()).toBe(expiresAt);
    expect(key!.allowedModels!.values.map((value) => value.kind.value)).toEqual(['service/*', 'acc-large']);
    expect(limitsOf(key!.rateLimits)).toEqual([60, null, 3]);
    const rows = await service.runtime.db('spend_limits').where({ subject: key!.keyId }).select('period', service.runtime.db.raw('amount_usd::text AS amount'));
    expect(rows).toEqual([{ period: 'day', amount: '5.00' }]);
  });

  it('names the field of every bad setting', async () => {
    const keys = owner();
    const create = (fields: Record<string, unknown>) => keys.createKey({ name: 'bad', ...fields });
    await expectField(create({ scopes: v('inference') }), 'scopes');
    await expectField(create({ scopes: v([]) }), 'scopes');
    await expectField(create({ scopes: v(['inference', 'admin']) }), 'scopes[1]');
    await expectField(create({ scopes: v(['read', 'read']) }), 'scopes[1]');
    await expectField(create({ scopes: v([5]) }), 'scopes[0]');
    await expectField(create({ scopes: v(['']) }), 'scopes[0]');
    await expectField(create({ scopes: v(null) }), 'scopes');
    for (const expiresAt of [
      '2020-01-01T00:00:00Z',
      'tomorrow',
      '2030-02-30T00:00:00Z',
      '2030-01-01',
      '2030-01-01 00:00:00Z',
      '2030-01-01T25:00:00Z',
      new Date(Date.now() + 11 * 365 * 86_400_000).toISOString(),
      new Date(Date.now() - 1000).toISOString(),
    ]) {
      await expectField(create({ expiresAt: v(expiresAt) }), 'expires_at');
    }
    await expectField(create({ expiresAt: v(1893456000) }), 'expires_at');
    await expectField(create({ allowedModels: v([]) }), 'allowed_models');
    await expectField(create({ allowedModels: v('service/*') }), 'allowed_models');
    await expectField(create({ allowedModels: v(Array.from({ length: 51 }, (_, i) => `m${i}`)) }), 'allowed_models');
    await expectField(create({ allowedModels: v(['a', 'b', 'c', '  ']) }), 'allowed_models[3]');
    await expectField(create({ allowedModels: v(['a', '']) }), 'allowed_models[1]');
    await expectField(create({ allowedModels: v(['a', 'x'.repeat(201)]) }), 'allowed_models[1]');
    await expectField(create({ allowedModels: v(['a', ' a']) }), 'allowed_models[1]');
    await expectField(create({ allowedModels: v([null]) }), 'allowed_models[0]');
    for (const limit of [0, -1, 1.5, '5', 1_000_000_001, true, {}]) {
      await expectField(create({ rateLimits: v({ requests_per_minute: limit as JsonValue }) }), 'rate_limits.requests_per_minute');
    }
    await expectField(create({ rateLimits: v({ tokens_per_minute: 0 }) }), 'rate_limits.tokens_per_minute');
    await expectField(create({ rateLimits: v({ max_concurrent: 2.5 }) }), 'rate_limits.max_concurrent');
    await expectField(create({ rateLimits: v({ requests_per_hour: 5 }) }), 'rate_limits.requests_per_hour');
    await expectField(create({ rateLimits: v([60]) }), 'rate_limits');
    await expectField(create({ spendLimits: [{ period: 'hour', amountUsd: v('1') }] }), 'spend_limits[0].period');
    await expectField(
      create({
        spendLimits: [
          { period: 'day', amountUsd: v('1') },
          { period: 'day', amountUsd: v('2') },
        ],
      }),
      'spend_limits[1].period',
    );
    await expectField(create({ spendLimits: [{ period: 'day', amountUsd: v(5) }] }), 'spend_limits[0].amount_usd');
    await expectField(create({ spendLimits: [{ period: 'week', amountUsd: v('-1') }] }), 'spend_limits[0].amount_usd');
    await expectField(create({ spendLimits: [{ period: 'week' }] }), 'spend_limits[0].amount_usd');
    await expectField(create({ monthlySpendCapUsd: '5', spendLimits: [{ period: 'month', amountUsd: v('5') }] }), 'monthly_spend_cap_usd');
    expect((await keys.listKeys({ limit: 100 })).data.filter((key) => key.name === 'bad')).toEqual([]);
  });

  it('parses RFC 3339 strictly: offsets and fractions, nothing out of range', () => {
    expect(parseRfc3339('2030-01-01T10:00:00+02:00')?.toISOString()).toBe('2030-01-01T08:00:00.000Z');
    expect(parseRfc3339('2030-01-01t10:00:00.5z')?.toISOString()).toBe('2030-01-01T10:00:00.500Z');
    expect(parseRfc3339('2028-02-29T00:00:00Z')).toBeDefined();
    for (const raw of ['2029-02-29T00:00:00Z', '2030-01-01T10:00:60Z', '2030-01-01T10:00:00+24:00', '2030-00-01T00:00:00Z', '2030-01-01T10:00:00']) {
      expect(parseRfc3339(raw), raw).toBeUndefined();
    }
  });
});

describe('the scopes an API key may grant', () => {
  it('lets a key grant only scopes it has, naming the first it lacks; a key without scopes grants none', async () => {
    const manager = clientAs(KeyService, keyPrincipal(['inference', 'manage']));
    expect((await manager.createKey({ name: 'narrow', scopes: v(['inference']) })).key!.scopes).toEqual(['inference']);
    expect(await errorOf(manager.createKey({ name: 'wide' }))).toEqual({
      code: Code.PermissionDenied,
      error: 'insufficient_scope',
      field: '',
      metadata: { required_scope: 'read' },
    });
    // A key principal without the scope claim is refused by the access rule (fail closed) before the grant rule.
    expect((await errorOf(clientAs(KeyService, keyPrincipal(undefined)).createKey({ name: 'x', scopes: v(['inference']) }))).metadata).toEqual({
      required_scope: 'manage',
    });

    const { key } = await owner().createKey({ name: 'target', scopes: v(['inference']) });
    expect(await errorOf(manager.updateKey({ keyId: key!.keyId, scopes: v(['read']) }))).toMatchObject({
      error: 'insufficient_scope',
      metadata: { required_scope: 'read' },
    });
    // Other settings, and scopes it has, it may change.
    expect((await manager.updateKey({ keyId: key!.keyId, scopes: v(['inference', 'manage']), name: 'renamed' })).scopes).toEqual(['inference', 'manage']);
    const wide = await owner().createKey({ name: 'wide' });
    expect(await errorOf(manager.rotateKey({ keyId: wide.key!.keyId }))).toMatchObject({ error: 'insufficient_scope', metadata: { required_scope: 'read' } });
    // Input is checked first (400), then the grant (403).
    await expectField(manager.createKey({ name: 'x', scopes: v(['read']), expiresAt: v('never') }), 'expires_at');
  });
});

describe('PATCH /v1/keys/{key_id}', () => {
  it('changes what is sent, clears what is null, keeps what is left out, and says what changed', async () => {
    const keys = owner();
    const { key } = await keys.createKey({ name: 'p', allowedModels: v(['a/*']), rateLimits: v({ requests_per_minute: 5 }) });
    const keyId = key!.keyId;
    const expiresAt = inAnHour();
    const patched = await keys.updateKey({ keyId, expiresAt: v(expiresAt), rateLimits: v({ tokens_per_minute: 1000 }), scopes: v(['read']) });
    expect(patched).toMatchObject({ name: 'p', scopes: ['read'] });
    expect(timestampDate(patched.expiresAt!).toISOString()).toBe(expiresAt);
    expect(patched.allowedModels!.values.map((value) => value.kind.value)).toEqual(['a/*']);
    // The object replaces the previous one whole.
    expect(limitsOf(patched.rateLimits)).toEqual([null, 1000, null]);

    const cleared = await keys.updateKey({ keyId, expiresAt: v(null), allowedModels: v(null), rateLimits: v(null) });
    expect(cleared.expiresAt).toBeUndefined();
    expect(cleared.allowedModels).toBeUndefined();
    expect(limitsOf(cleared.rateLimits)).toEqual([null, null, null]);
    expect(cleared.scopes).toEqual(['read']);

    await keys.updateKey({ keyId, name: 'renamed' });
    // The same values again change nothing and send nothing.
    await keys.updateKey({ keyId, name: 'renamed', scopes: v(['read']), allowedModels: v(null) });
    expect((await eventsOf('key.updated', keyId)).map((data) => [data.change, data.changed_fields])).toEqual([
      ['settings', ['scopes', 'expires_at', 'rate_limits']],
      ['settings', ['expires_at', 'allowed_models', 'rate_limits']],
      ['name', ['name']],
    ]);
  });

  it('refuses null scopes and bad values by field, then another workspace (404) and a revoked key (409)', async () => {
    const keys = owner();
    const { key } = await keys.createKey({ name: 'q' });
    const keyId = key!.keyId;
    await expectField(keys.updateKey({ keyId, scopes: v(null) }), 'scopes');
    await expectField(keys.updateKey({ keyId, scopes: v(['inference', 'everything']) }), 'scopes[1]');
    await expectField(keys.updateKey({ keyId, expiresAt: v('2001-01-01T00:00:00Z') }), 'expires_at');
    await expectField(keys.updateKey({ keyId, allowedModels: v(['ok', '']) }), 'allowed_models[1]');
    await expectField(keys.updateKey({ keyId, rateLimits: v({ max_concurrent: 0 }) }), 'rate_limits.max_concurrent');
    await expectField(keys.updateKey({ keyId, name: ' ' }), 'name');

    const stranger = clientAs(KeyService, { ...member(), workspaceId: newId('org') });
    // One call at a time: a refusal nobody awaits yet would be an unhandled rejection.
    for (const call of [
      () => stranger.updateKey({ keyId, scopes: v(['read']) }),
      () => stranger.updateKeySpendLimits({ keyId, spendLimits: [] }),
      () => stranger.rotateKey({ keyId }),
      () => stranger.setAlertWebhook({ keyId, url: 'https://a.example.com', thresholdsPct: v([10]) }),
    ]) {
      expect(await refusalOf(call())).toEqual({ code: Code.NotFound, error: 'key_not_found', field: '' });
    }
    expect(await refusalOf(clientAs(KeyService, member('developer', newId('usr'))).updateKey({ keyId, name: 'x' }))).toMatchObject({ error: 'forbidden' });
    await keys.revokeKey({ keyId });
    expect(await refusalOf(keys.updateKey({ keyId, rateLimits: v(null) }))).toMatchObject({ code: Code.FailedPrecondition, error: 'key_revoked' });
  });
});

describe('budgets and alert thresholds', () => {
  it('PUT …/spend-limits replaces the budgets; the month entry is the cap', async () => {
    const keys = owner();
    const { key } = await keys.createKey({ name: 'b', monthlySpendCapUsd: '50' });
    const keyId = key!.keyId;
    const set = await keys.updateKeySpendLimits({
      keyId,
      spendLimits: [
        { period: 'total', amountUsd: v('1000') },
        { period: 'month', amountUsd: v('75.50') },
        { period: 'week', amountUsd: v('20') },
      ],
    });
    expect(set.monthlySpendCapUsd).toBe('75.50');
    const rows = await service.runtime.db('spend_limits').where({ subject: keyId }).orderBy('period').select('period');
    expect(rows.map((row) => row.period)).toEqual(['total', 'week']);
    // The same budgets again, in another order, change nothing and send nothing.
    await keys.updateKeySpendLimits({
      keyId,
      spendLimits: [
        { period: 'week', amountUsd: v('20') },
        { period: 'month', amountUsd: v('75.50') },
        { period: 'total', amountUsd: v('1000') },
      ],
    });
    await keys.updateKeySpendLimits({
      keyId,
      spendLimits: [
        { period: 'week', amountUsd: v('25') },
        { period: 'month', amountUsd: v('75.50') },
      ],
    });
    expect((await keys.updateKeySpendLimits({ keyId, spendLimits: [] })).monthlySpendCapUsd).toBeUndefined();
    expect(await service.runtime.db('spend_limits').where({ subject: keyId })).toEqual([]);
    await keys.updateKeySpendLimits({ keyId, spendLimits: [] });
    expect((await eventsOf('key.updated', keyId)).map((data) => [data.change, data.changed_fields])).toEqual([
      ['spend_limits', ['spend_limits', 'monthly_spend_cap_usd']],
      ['spend_limits', ['spend_limits']],
      ['spend_limits', ['spend_limits', 'monthly_spend_cap_usd']],
    ]);
    await expectField(
      keys.updateKeySpendLimits({
        keyId,
        spendLimits: [
          { period: 'day', amountUsd: v('1') },
          { period: 'week', amountUsd: v('1') },
          { period: 'month', amountUsd: v('1') },
          { period: 'total', amountUsd: v('1') },
          { period: 'day', amountUsd: v('1') },
        ],
      }),
      'spend_limits',
    );
    await expectField(keys.updateKeySpendLimits({ keyId, spendLimits: [{ period: 'day', amountUsd: v('1e3') }] }), 'spend_limits[0].amount_usd');
  });

  it('PATCH …/spend-cap names both fields of a new cap, and sends nothing for the cap the key has', async () => {
    const keys = owner();
    const { key } = await keys.createKey({ name: 'c', monthlySpendCapUsd: '50' });
    const keyId = key!.keyId;
    await keys.updateSpendCap({ keyId, monthlySpendCapUsd: '50' });
    // Kept as given: "50.00" is another cap than "50".
    expect(await keys.updateSpendCap({ keyId, monthlySpendCapUsd: '50.00' })).toMatchObject({ monthlySpendCapUsd: '50.00' });
    await keys.updateSpendCap({ keyId, monthlySpendCapUsd: '50.00' });
    await keys.updateSpendCap({ keyId, clear: true });
    await keys.updateSpendCap({ keyId, clear: true });
    expect((await eventsOf('key.updated', keyId)).map((data) => [data.change, data.changed_fields])).toEqual([
      ['spend_cap', ['monthly_spend_cap_usd', 'spend_limits']],
      ['spend_cap', ['monthly_spend_cap_usd', 'spend_limits']],
    ]);
  });

  it('takes thresholds_pct (sorted, never empty), or threshold_pct alone as [n, 100], or neither as [80, 100]; alert_threshold_pct is the first', async () => {
    const keys = owner();
    const { key } = await keys.createKey({ name: 't' });
    const keyId = key!.keyId;
    const url = 'https://alerts.example.com/h';
    expect(await keys.setAlertWebhook({ keyId, url, thresholdsPct: v([90, 25, 50]) })).toMatchObject({
      alertThresholdsPct: [25, 50, 90],
      alertThresholdPct: 25,
    });
    expect(await keys.setAlertWebhook({ keyId, url, thresholdPct: 60 })).toMatchObject({ alertThresholdsPct: [60, 100], alertThresholdPct: 60 });
    expect(await keys.setAlertWebhook({ keyId, url, thresholdPct: 100 })).toMatchObject({ alertThresholdsPct: [100], alertThresholdPct: 100 });
    expect(await keys.setAlertWebhook({ keyId, url })).toMatchObject({ alertThresholdsPct: [80, 100], alertThresholdPct: 80 });
    await expectField(keys.setAlertWebhook({ keyId, url, thresholdPct: 50, thresholdsPct: v([50]) }), 'thresholds_pct');
    await expectField(keys.setAlertWebhook({ keyId, url, thresholdsPct: v([50, 0]) }), 'thresholds_pct[1]');
    await expectField(keys.setAlertWebhook({ keyId, url, thresholdsPct: v([101]) }), 'thresholds_pct[0]');
    await expectField(keys.setAlertWebhook({ keyId, url, thresholdsPct: v([10, 20, 10]) }), 'thresholds_pct[2]');
    await expectField(keys.setAlertWebhook({ keyId, url, thresholdsPct: v(Array.from({ length: 11 }, (_, i) => i + 1)) }), 'thresholds_pct');
    // An empty list is refused, not read as the default (that is leaving it out), nor as no alerts.
    await expectField(keys.setAlertWebhook({ keyId, url, thresholdsPct: v([]) }), 'thresholds_pct');
    await expectField(keys.setAlertWebhook({ keyId, url, thresholdsPct: v([]), thresholdPct: 50 }), 'thresholds_pct');
    await expectField(keys.setAlertWebhook({ keyId, url, thresholdsPct: v(null) }), 'thresholds_pct');
    await expectField(keys.setAlertWebhook({ keyId, url, thresholdsPct: v(['50']) }), 'thresholds_pct[0]');
    const removed = await keys.deleteAlertWebhook({ keyId });
    expect([removed.alertThresholdsPct, removed.alertThresholdPct]).toEqual([[], undefined]);
  });
});

describe('rotation', () => {
  it('makes a key with every setting and the budget of the old one, which expires after the grace period', async () => {
    const keys = owner();
    const expiresAt = new Date(Date.now() + 7 * 86_400_000);
    const old = await keys.createKey({
      name: 'prod',
      scopes: v(['inference', 'read']),
      expiresAt: v(expiresAt.toISOString()),
      allowedModels: v(['service/*']),
      rateLimits: v({ requests_per_minute: 20, max_concurrent: 3 }),
      routingPolicy: 'cn-only',
      spendLimits: [
        { period: 'day', amountUsd: v('5') },
        { period: 'month', amountUsd: v('50') },
      ],
    });
    const oldId = old.key!.keyId;
    const webhook = await keys.setAlertWebhook({ keyId: oldId, url: 'https://alerts.example.com/h', thresholdsPct: v([50, 100]) });
    const before = Date.now();
    const rotated = await clientAs(KeyService, member('owner')).rotateKey({ keyId: oldId, gracePeriodSeconds: v(3600) });
    expect(rotated.fullKey).toMatch(/^sb_/);
    expect(rotated.fullKey).not.toBe(old.fullKey);
    const newId_ = rotated.key!.keyId;
    expect(rotated.key).toMatchObject({
      name: 'prod',
      scopes: ['inference', 'read'],
      routingPolicy: 'cn-only',
      monthlySpendCapUsd: '50',
      alertWebhookUrl: 'https://alerts.example.com/h',
      alertThresholdsPct: [50, 100],
      rotatedFrom: oldId,
      status: 'active',
      createdBy: ownerId,
    });
    expect(timestampDate(rotated.key!.expiresAt!).getTime()).toBe(expiresAt.getTime());
    expect(rotated.key!.allowedModels!.values.map((value) => value.kind.value)).toEqual(['service/*']);
    expect(limitsOf(rotated.key!.rateLimits)).toEqual([20, null, 3]);
    const previousExpiry = timestampDate(rotated.previous!.expiresAt!).getTime();
    expect(previousExpiry).toBeGreaterThanOrEqual(before + 3_600_000 - 1000);
    expect(previousExpiry).toBeLessThanOrEqual(Date.now() + 3_600_000);
    expect(rotated.previous).toMatchObject({ keyId: oldId, status: 'active' });
    // The same alert secret signs for both.
    const webhooks = clientAs(KeyService, { caller: 'webhooks' });
    expect((await webhooks.resolveAlertWebhook({ keyId: newId_ })).signingSecret).toBe(webhook.signingSecret);
    const limits = await service.runtime.db('spend_limits').where({ subject: newId_ }).select('period');
    expect(limits.map((row) => row.period)).toEqual(['day']);

    // One budget: the new key's state names the old key's.
    const states = await allKeyStates();
    expect(states.get(newId_)).toMatchObject({ budgetId: oldId, scopes: ['inference', 'read'], spendLimits: [{ period: 'day', amountUsd: '5' }] });
    expect(states.get(oldId)).toMatchObject({ budgetId: oldId });

    expect(await eventsOf('key.created', newId_)).toHaveLength(1);
    expect(await eventsOf('key.rotated', newId_)).toEqual([
      { key_id: newId_, workspace_id: workspaceId, previous_key_id: oldId, previous_expires_at: expect.any(String), rotated_by: ownerId },
    ]);
    expect((await eventsOf('key.updated', oldId)).at(-1)).toMatchObject({ change: 'rotated', changed_fields: ['expires_at'] });

    // The month's spend of the budget is both keys': the new key shows it, and its cap counts it.
    const month = `${new Date().toISOString().slice(0, 7)}-01`;
    await service.runtime.db('key_monthly_spend').insert({ key_id: oldId, month, spend_usd: '50' });
    expect((await keys.getKey({ keyId: newId_ })).monthToDateSpendUsd).toBe('50');
    const dataPlane = clientAs(KeyService, { caller: 'data-plane' });
    expect(await dataPlane.authorizeKey({ fullKey: rotated.fullKey })).toMatchObject({ allowed: false, reason: 'spend_cap_exceeded', spendUsd: '50' });
    await service.runtime.db('key_monthly_spend').where({ key_id: oldId }).delete();

    // Rotating the new key again keeps the first budget.
    const again = await keys.rotateKey({ keyId: newId_, gracePeriodSeconds: v(0) });
    expect((await allKeyStates()).get(again.key!.keyId)).toMatchObject({ budgetId: oldId });
    expect(again.key!.rotatedFrom).toBe(newId_);
    // Grace 0: the replaced key is expired at once, and cannot be rotated again.
    const gateway = clientAs(KeyService, { caller: 'gateway' });
    expect(await gateway.authenticateKey({ fullKey: rotated.fullKey })).toMatchObject({ reason: 'expired', keyId: newId_ });
    expect(await gateway.authenticateKey({ fullKey: again.fullKey })).toMatchObject({ reason: '' });
    expect(await refusalOf(keys.rotateKey({ keyId: newId_ }))).toMatchObject({ code: Code.FailedPrecondition, error: 'key_revoked' });
  });

  it('keeps an earlier expiry, checks the grace period, and refuses a revoked key', async () => {
    const keys = owner();
    const soon = new Date(Date.now() + 60_000);
    const { key } = await keys.createKey({ name: 'soon', expiresAt: v(soon.toISOString()) });
    const rotated = await keys.rotateKey({ keyId: key!.keyId });
    expect(timestampDate(rotated.previous!.expiresAt!).getTime()).toBe(soon.getTime());
    for (const grace of [-1, 604_801, 1.5, '60', true]) {
      await expectField(keys.rotateKey({ keyId: rotated.key!.keyId, gracePeriodSeconds: v(grace) }), 'grace_period_seconds');
    }
    // The new key keeps the old one's expiry: a key without one shows the grace period itself.
    const lasting = (await keys.createKey({ name: 'lasting' })).key!.keyId;
    const defaulted = await keys.rotateKey({ keyId: lasting, gracePeriodSeconds: v(null) });
    expect(timestampDate(defaulted.previous!.expiresAt!).getTime()).toBeGreaterThan(Date.now() + 86_400_000 - 5000);
    const max = await keys.rotateKey({ keyId: defaulted.key!.keyId, gracePeriodSeconds: v(604_800) });
    expect(timestampDate(max.previous!.expiresAt!).getTime()).toBeGreaterThan(Date.now() + 604_800_000 - 5000);
    await keys.revokeKey({ keyId: max.key!.keyId });
    expect(await refusalOf(keys.rotateKey({ keyId: max.key!.keyId }))).toMatchObject({ error: 'key_revoked' });
  });

  it('refuses to rotate a key whose successor is active, and allows it again once that one is revoked', async () => {
    const keys = owner();
    const { key } = await keys.createKey({ name: 'twice' });
    const first = await keys.rotateKey({ keyId: key!.keyId });
    expect(await refusalOf(keys.rotateKey({ keyId: key!.keyId }))).toMatchObject({ code: Code.FailedPrecondition, error: 'key_already_rotated' });
    await keys.revokeKey({ keyId: first.key!.keyId });
    expect((await keys.rotateKey({ keyId: key!.keyId })).key!.rotatedFrom).toBe(key!.keyId);
  });
});

describe('the lifetime an API key may give', () => {
  it('never past its own expiry: a key it makes ends with it, and it cannot extend, clear or rotate past it', async () => {
    const end = new Date(Date.now() + 3_600_000);
    const caller = await owner().createKey({ name: 'contractor', expiresAt: v(end.toISOString()) });
    const asKey = clientAs(KeyService, keyPrincipal(['inference', 'read', 'manage'], caller.key!.keyId));
    const refused = { code: Code.PermissionDenied, error: 'forbidden', field: 'expires_at', metadata: { expires_at_limit: end.toISOString() } };

    // Without an expiry of its own, a key made by the key gets the key's.
    const made = await asKey.createKey({ name: 'child' });
    expect(timestampDate(made.key!.expiresAt!).getTime()).toBe(end.getTime());
    expect(await errorOf(asKey.createKey({ name: 'forever', expiresAt: v(null) }))).toEqual(refused);
    expect(await errorOf(asKey.createKey({ name: 'later', expiresAt: v(new Date(end.getTime() + 1000).toISOString()) }))).toEqual(refused);
    const earlier = new Date(end.getTime() - 60_000);
    expect(timestampDate((await asKey.createKey({ name: 'earlier', expiresAt: v(earlier.toISOString()) })).key!.expiresAt!).getTime()).toBe(earlier.getTime());

    // Its own expiry cannot be cleared or pushed back; brought forward, it may.
    expect(await errorOf(asKey.updateKey({ keyId: caller.key!.keyId, expiresAt: v(null) }))).toEqual(refused);
    expect(await errorOf(asKey.updateKey({ keyId: made.key!.keyId, expiresAt: v(new Date(end.getTime() + 60_000).toISOString()) }))).toEqual(refused);
    expect(timestampDate((await asKey.updateKey({ keyId: made.key!.keyId, expiresAt: v(earlier.toISOString()) })).expiresAt!).getTime()).toBe(
      earlier.getTime(),
    );

    // A key that never expires, rotated by it, would hand out a credential that outlives it.
    const lasting = await owner().createKey({ name: 'lasting' });
    expect(await errorOf(asKey.rotateKey({ keyId: lasting.key!.keyId }))).toEqual(refused);
    // A user's session is not bound by any key's expiry.
    expect((await owner().updateKey({ keyId: caller.key!.keyId, expiresAt: v(null) })).expiresAt).toBeUndefined();
  });
});

describe('GET /v1/key', () => {
  it('describes the API key of the request, and is a 400 for a user', async () => {
    const { key } = await owner().createKey({
      name: 'me',
      scopes: v(['inference']),
      allowedModels: v(['acc-*']),
      rateLimits: v({ requests_per_minute: 7 }),
    });
    const current = await clientAs(KeyService, keyPrincipal(['inference'], key!.keyId)).getCurrentKey({});
    expect(current).toMatchObject({ keyId: key!.keyId, name: 'me', scopes: ['inference'], routingPolicy: 'any', rateLimits: { requestsPerMinute: 7 } });
    expect(current.allowedModels!.values.map((value) => value.kind.value)).toEqual(['acc-*']);
    expect(current.expiresAt).toBeUndefined();
    expect(await refusalOf(owner().getCurrentKey({}))).toEqual({ code: Code.InvalidArgument, error: 'api_key_required', field: '' });
  });

  it('lists the spend of each budget of the key, the month included', async () => {
    const { key } = await owner().createKey({
      name: 'budgeted',
      spendLimits: [
        { period: 'day', amountUsd: v('5') },
        { period: 'month', amountUsd: v('50') },
      ],
    });
    const current = await clientAs(KeyService, keyPrincipal(['inference'], key!.keyId)).getCurrentKey({});
    expect(current.spend.map((entry) => [entry.period, entry.limitUsd, entry.spendUsd, entry.remainingUsd])).toEqual([
      ['day', '5', '0', '5'],
      ['month', '50', '0', '50'],
    ]);
    expect((await owner().getKey({ keyId: key!.keyId })).spendLimits.map((limit) => limit.period)).toEqual(['day', 'month']);
  });
});

/** Every key state of the schema, by key id (the newest of each). */
async function allKeyStates() {
  const dataPlane = clientAs(KeyService, { caller: 'data-plane' });
  const states = new Map<string, Awaited<ReturnType<typeof dataPlane.listKeyStates>>['states'][number]>();
  let after = 0n;
  for (let more = true; more; ) {
    const page = await dataPlane.listKeyStates({ afterVersion: after, limit: 5000 });
    for (const state of page.states) states.set(state.keyId, state);
    after = page.version;
    more = page.hasMore;
  }
  return states;
}

describe('expiry and the key states', () => {
  it('refuses an expired key in AuthenticateKey and AuthorizeKey by the clock, and gives the gateway scopes and expiry', async () => {
    const keys = owner();
    const expiresAt = inAnHour();
    const live = await keys.createKey({ name: 'live', scopes: v(['inference', 'read']), expiresAt: v(expiresAt) });
    const gateway = clientAs(KeyService, { caller: 'gateway' });
    const answer = await gateway.authenticateKey({ fullKey: live.fullKey });
    expect(answer).toMatchObject({ reason: '', scopes: ['inference', 'read'] });
    expect(timestampDate(answer.expiresAt!).toISOString()).toBe(expiresAt);

    const lapsed = await keys.createKey({ name: 'lapsed' });
    await service.runtime
      .db('api_keys')
      .where({ id: lapsed.key!.keyId })
      .update({ expires_at: new Date(Date.now() - 1000) });
    expect(await gateway.authenticateKey({ fullKey: lapsed.fullKey })).toMatchObject({ reason: 'expired', keyId: lapsed.key!.keyId, status: 'active' });
    expect(await clientAs(KeyService, { caller: 'data-plane' }).authorizeKey({ fullKey: lapsed.fullKey })).toMatchObject({ allowed: false, reason: 'expired' });
    // The record stays active: status is about revocation.
    expect((await keys.getKey({ keyId: lapsed.key!.keyId })).status).toBe('active');
  });

  it('decides expiry by the clock of the answer, whatever the age of the cached state', async () => {
    const { fullKey } = await owner().createKey({ name: 'clocked', expiresAt: v(inAnHour()) });
    let now = new Date();
    const authorizer = new KeyAuthorizer({ db: service.runtime.db, log: service.runtime.log, states: handlers.states, clock: () => now });
    expect(await authorizer.authenticate(fullKey)).toMatchObject({ reason: '' });
    expect(await authorizer.authorize(fullKey)).toMatchObject({ allowed: true });
    now = new Date(Date.now() + 3_600_000 + 1000);
    expect(await authorizer.authenticate(fullKey)).toMatchObject({ reason: 'expired' });
    expect(await authorizer.authorize(fullKey)).toMatchObject({ allowed: false, reason: 'expired' });
  });

  it('feeds the data plane every new setting, each change bumping the key state version', async () => {
    const keys = owner();
    const { key } = await keys.createKey({ name: 'fed', allowedModels: v(['x/*']), rateLimits: v({ tokens_per_minute: 500 }) });
    const keyId = key!.keyId;
    const first = (await allKeyStates()).get(keyId)!;
    expect(first).toMatchObject({ scopes: ['inference', 'read', 'manage'], allowedModels: ['x/*'], allModels: false, budgetId: keyId, spendLimits: [] });
    expect(limitsOf(first.rateLimits)).toEqual([null, 500, null]);
    expect(first.expiresAt).toBeUndefined();

    // A day budget alone (no column of the key changes) is a new version too.
    await keys.updateKeySpendLimits({ keyId, spendLimits: [{ period: 'day', amountUsd: v('3') }] });
    const second = (await allKeyStates()).get(keyId)!;
    expect(second.version).toBeGreaterThan(first.version);
    expect(second.spendLimits).toMatchObject([{ period: 'day', amountUsd: '3' }]);

    await keys.updateKey({ keyId, allowedModels: v(null), expiresAt: v(inAnHour()) });
    const third = (await allKeyStates()).get(keyId)!;
    expect(third.version).toBeGreaterThan(second.version);
    expect(third).toMatchObject({ allowedModels: [], allModels: true });
    expect(third.expiresAt).toBeDefined();
  });

  it('announces key.expired once per expiry, never for a revoked key, again after a new expiry passes', async () => {
    const { db, recordEvent } = service.runtime;
    const keys = owner();
    const expiring = await keys.createKey({ name: 'expiring', expiresAt: v(new Date(Date.now() + 2000).toISOString()) });
    const revoked = await keys.createKey({ name: 'revoked', expiresAt: v(new Date(Date.now() + 2000).toISOString()) });
    await keys.revokeKey({ keyId: revoked.key!.keyId });
    const id = expiring.key!.keyId;
    // Before its expiry: nothing.
    await announceExpiredKeys(db, recordEvent, new Date());
    expect(await eventsOf('key.expired', id)).toEqual([]);
    const later = new Date(Date.now() + 5000);
    await announceExpiredKeys(db, recordEvent, later);
    await announceExpiredKeys(db, recordEvent, later);
    expect(await eventsOf('key.expired', id)).toEqual([{ key_id: id, workspace_id: workspaceId, expired_at: expect.any(String) }]);
    expect(await eventsOf('key.expired', revoked.key!.keyId)).toEqual([]);

    // A new expiry is a new announcement once it passes.
    await keys.updateKey({ keyId: id, expiresAt: v(new Date(Date.now() + 3000).toISOString()) });
    await announceExpiredKeys(db, recordEvent, new Date(Date.now() + 10_000));
    expect(await eventsOf('key.expired', id)).toHaveLength(2);
  });
});
