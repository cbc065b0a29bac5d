import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { EventEnvelopeJson } from '@switchboard/runtime/consumer';
import { createLocalCertificate, type LocalCertificate } from '@switchboard/runtime/dev/local-certificate';
import { eventually } from '@switchboard/runtime/testing';
import { EventBus } from '@switchboard/testkit/events';
import { type ApiResponse, createKey as createKeyAs, expectErrorBody, keyRecordFields, meshSuiteOfFile, signUp } from '@switchboard/testkit/mesh';
import { verifyDelivery, WebhookReceiver } from '@switchboard/testkit/webhook-receiver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Keys II through REST (docs/api/keys.md#scopes … #introspection): the new fields of the key
 * record, PATCH of every setting, budgets, alert thresholds, rotation with its grace period,
 * expiry, GET /v1/key, the scopes a key may grant, every refusal with its body, and another
 * workspace's key a 404 on every new route.
 */

let certificate: LocalCertificate;
let receiver: WebhookReceiver;

// Before the mesh boots: its webhooks service trusts the receiver's certificate.
beforeAll(async () => {
  certificate = await createLocalCertificate(await mkdtemp(path.join(tmpdir(), 'switchboard-cert-')));
  receiver = await WebhookReceiver.start(certificate);
});

// Housekeeping every second: key.expired follows an expiry within about a second.
const suite = meshSuiteOfFile(() => ({
  HOUSEKEEPING_INTERVAL: '1s',
  WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
  NODE_EXTRA_CA_CERTS: certificate.certFile,
  WEBHOOK_POLL_INTERVAL: '200ms',
}));
let bus: EventBus;
let keyEvents: EventEnvelopeJson[];

beforeAll(async () => {
  bus = await EventBus.connect();
  keyEvents = bus.observe('key.>');
  await bus.flush();
});

afterAll(async () => {
  await bus?.close();
  await receiver?.close();
});

const createKey = (token: string, body?: Record<string, unknown>) => createKeyAs(suite.call, token, body);

const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();
const noLimits = { requests_per_minute: null, tokens_per_minute: null, max_concurrent: null };

/** The events of `type` about `keyId` seen on the stream so far. */
const eventsOf = (type: string, keyId: string) => keyEvents.filter((event) => event.type === type && event.data.key_id === keyId).map((event) => event.data);

describe('the key record of Keys II', () => {
  it('shows every new field, with its default', async () => {
    const { token } = await signUp(suite.call);
    const { key } = await createKey(token);
    expect(Object.keys(key).sort()).toEqual(keyRecordFields);
    expect(key).toMatchObject({
      scopes: ['inference', 'read', 'manage'],
      expires_at: null,
      allowed_models: null,
      rate_limits: noLimits,
      spend_limits: [],
      rotated_from: null,
      alert_thresholds_pct: [],
    });
  });

  it('creates a key with every setting, and shows it the same on GET and in the list', async () => {
    const { token } = await signUp(suite.call);
    const expiresAt = '2030-06-01T12:00:00Z';
    const { key } = await createKey(token, {
      name: 'limited',
      scopes: ['read', 'inference'],
      expires_at: expiresAt,
      allowed_models: ['service/*', ' acc-large '],
      rate_limits: { requests_per_minute: 20, tokens_per_minute: 10_000, max_concurrent: 3 },
      spend_limits: [
        { period: 'day', amount_usd: '5.00' },
        { period: 'month', amount_usd: '50' },
      ],
    });
    expect(key).toMatchObject({
      scopes: ['inference', 'read'],
      allowed_models: ['service/*', 'acc-large'],
      rate_limits: { requests_per_minute: 20, tokens_per_minute: 10_000, max_concurrent: 3 },
      monthly_spend_cap_usd: '50',
    });
    expect(Date.parse(key.expires_at as string)).toBe(Date.parse(expiresAt));
    expect((await suite.call('GET', `/v1/keys/${key.key_id}`, { token })).json).toEqual(key);
    expect((await suite.call('GET', '/v1/keys', { token })).json.data).toEqual([key]);
  });

  it('lists each budget with its spend and when it resets, the month included', async () => {
    const { token } = await signUp(suite.call);
    const { key } = await createKey(token, {
      name: 'budgets',
      spend_limits: [
        { period: 'day', amount_usd: '5.00' },
        { period: 'total', amount_usd: '500' },
      ],
      monthly_spend_cap_usd: '50',
    });
    const now = new Date();
    expect(key.spend_limits).toEqual([
      {
        period: 'day',
        amount_usd: '5.00',
        spend_usd: '0',
        remaining_usd: '5',
        resets_at: rfc3339(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1)),
      },
      {
        period: 'month',
        amount_usd: '50',
        spend_usd: '0',
        remaining_usd: '50',
        resets_at: rfc3339(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)),
      },
      { period: 'total', amount_usd: '500', spend_usd: '0', remaining_usd: '500', resets_at: null },
    ]);
  });
});

/** A time as the REST surface writes it: RFC 3339 in UTC, whole seconds without a fraction. */
const rfc3339 = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

describe('bad settings', () => {
  it('are a 400 naming the field, on creation', async () => {
    const { token } = await signUp(suite.call);
    const refused = async (body: Record<string, unknown>, field: string) =>
      expectErrorBody(await suite.call('POST', '/v1/keys', { token, body: { name: 'bad', ...body } }), 400, 'invalid_request', field);
    await refused({ scopes: [] }, 'scopes');
    await refused({ scopes: 'manage' }, 'scopes');
    await refused({ scopes: ['inference', 'admin'] }, 'scopes[1]');
    await refused({ scopes: ['inference', ''] }, 'scopes[1]');
    await refused({ scopes: ['read', 'read'] }, 'scopes[1]');
    await refused({ expires_at: '2020-01-01T00:00:00Z' }, 'expires_at');
    await refused({ expires_at: 'next week' }, 'expires_at');
    await refused({ expires_at: '2030-02-30T00:00:00Z' }, 'expires_at');
    await refused({ expires_at: '2099-01-01T00:00:00Z' }, 'expires_at');
    await refused({ expires_at: 1_900_000_000 }, 'expires_at');
    await refused({ allowed_models: [] }, 'allowed_models');
    await refused({ allowed_models: Array.from({ length: 51 }, (_, i) => `model-${i}`) }, 'allowed_models');
    await refused({ allowed_models: ['a', 'b', 'c', ''] }, 'allowed_models[3]');
    await refused({ allowed_models: ['a', 'x'.repeat(201)] }, 'allowed_models[1]');
    await refused({ allowed_models: ['a', 'a'] }, 'allowed_models[1]');
    for (const limit of [0, -5, 2.5, '60', 1_000_000_001]) await refused({ rate_limits: { requests_per_minute: limit } }, 'rate_limits.requests_per_minute');
    await refused({ rate_limits: { tokens_per_minute: 0 } }, 'rate_limits.tokens_per_minute');
    await refused({ rate_limits: { max_concurrent: 1.5 } }, 'rate_limits.max_concurrent');
    await refused({ rate_limits: { requests_per_day: 5 } }, 'rate_limits.requests_per_day');
    await refused({ rate_limits: 60 }, 'rate_limits');
    await refused({ spend_limits: [{ period: 'hour', amount_usd: '1' }] }, 'spend_limits[0].period');
    await refused(
      {
        spend_limits: [
          { period: 'week', amount_usd: '1' },
          { period: 'week', amount_usd: '2' },
        ],
      },
      'spend_limits[1].period',
    );
    await refused({ spend_limits: [{ period: 'day', amount_usd: 5 }] }, 'spend_limits[0].amount_usd');
    await refused({ spend_limits: [{ period: 'day', amount_usd: '1e2' }] }, 'spend_limits[0].amount_usd');
    await refused({ monthly_spend_cap_usd: '5', spend_limits: [{ period: 'month', amount_usd: '5' }] }, 'monthly_spend_cap_usd');
    expect((await suite.call('GET', '/v1/keys', { token })).json.data).toEqual([]);
  });
});

describe('PATCH /v1/keys/{key_id}', () => {
  it('changes what is sent, clears what is null, keeps what is left out', async () => {
    const { token } = await signUp(suite.call);
    const { key } = await createKey(token, { name: 'p', allowed_models: ['a/*'], rate_limits: { max_concurrent: 2 } });
    const path = `/v1/keys/${key.key_id}`;
    const expiresAt = inAnHour();
    const patched = await suite.call('PATCH', path, {
      token,
      body: { scopes: ['inference'], expires_at: expiresAt, rate_limits: { requests_per_minute: 60 } },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json).toMatchObject({
      name: 'p',
      scopes: ['inference'],
      allowed_models: ['a/*'],
      rate_limits: { requests_per_minute: 60, tokens_per_minute: null, max_concurrent: null },
    });
    expect(Date.parse(patched.json.expires_at)).toBe(Date.parse(expiresAt));
    const cleared = await suite.call('PATCH', path, { token, body: { expires_at: null, allowed_models: null, rate_limits: null } });
    expect(cleared.json).toMatchObject({ expires_at: null, allowed_models: null, rate_limits: noLimits, scopes: ['inference'] });
    await eventually(() => eventsOf('key.updated', key.key_id as string).length === 2, 'the key.updated events');
    expect(eventsOf('key.updated', key.key_id as string).map((data) => [data.change, data.changed_fields])).toEqual([
      ['settings', ['scopes', 'expires_at', 'rate_limits']],
      ['settings', ['expires_at', 'allowed_models', 'rate_limits']],
    ]);

    expectErrorBody(await suite.call('PATCH', path, { token, body: { scopes: null } }), 400, 'invalid_request', 'scopes');
    expectErrorBody(await suite.call('PATCH', path, { token, body: { scopes: ['root'] } }), 400, 'invalid_request', 'scopes[0]');
    expectErrorBody(await suite.call('PATCH', path, { token, body: { expires_at: '2001-01-01T00:00:00Z' } }), 400, 'invalid_request', 'expires_at');
    expectErrorBody(await suite.call('PATCH', path, { token, body: { allowed_models: [' '] } }), 400, 'invalid_request', 'allowed_models[0]');
    expectErrorBody(
      await suite.call('PATCH', path, { token, body: { rate_limits: { tokens_per_minute: -1 } } }),
      400,
      'invalid_request',
      'rate_limits.tokens_per_minute',
    );
  });
});

describe('budgets and alert thresholds', () => {
  it('PUT …/spend-limits replaces the budgets; its month entry is monthly_spend_cap_usd', async () => {
    const { token } = await signUp(suite.call);
    const { key } = await createKey(token, { name: 'b', monthly_spend_cap_usd: '10' });
    const path = `/v1/keys/${key.key_id}/spend-limits`;
    const set = await suite.call('PUT', path, {
      token,
      body: {
        spend_limits: [
          { period: 'week', amount_usd: '20' },
          { period: 'month', amount_usd: '75.50' },
        ],
      },
    });
    expect(set.status, set.text).toBe(200);
    expect(set.json.monthly_spend_cap_usd).toBe('75.50');
    const none = await suite.call('PUT', path, { token, body: { spend_limits: [] } });
    expect(none.json.monthly_spend_cap_usd).toBeNull();
    expectErrorBody(
      await suite.call('PUT', path, { token, body: { spend_limits: [{ period: 'year', amount_usd: '1' }] } }),
      400,
      'invalid_request',
      'spend_limits[0].period',
    );
    expectErrorBody(
      await suite.call('PUT', path, { token, body: { spend_limits: [{ period: 'day', amount_usd: '-1' }] } }),
      400,
      'invalid_request',
      'spend_limits[0].amount_usd',
    );
    expectErrorBody(
      await suite.call('PUT', path, {
        token,
        body: {
          spend_limits: [
            { period: 'day', amount_usd: '1' },
            { period: 'day', amount_usd: '1' },
          ],
        },
      }),
      400,
      'invalid_request',
      'spend_limits[1].period',
    );
  });

  it('PUT …/alert-webhook takes thresholds_pct (never empty), or threshold_pct alone, not both', async () => {
    const { token } = await signUp(suite.call);
    const { key } = await createKey(token);
    const path = `/v1/keys/${key.key_id}/alert-webhook`;
    const url = 'https://alerts.example.com/h';
    const set = await suite.call('PUT', path, { token, body: { url, thresholds_pct: [75, 25, 50] } });
    expect(set.status, set.text).toBe(200);
    expect(set.json).toMatchObject({ alert_thresholds_pct: [25, 50, 75], alert_threshold_pct: 25 });
    expect((await suite.call('PUT', path, { token, body: { url, threshold_pct: 90 } })).json).toMatchObject({ alert_thresholds_pct: [90, 100] });
    expect((await suite.call('PUT', path, { token, body: { url } })).json).toMatchObject({ alert_thresholds_pct: [80, 100], alert_threshold_pct: 80 });
    expectErrorBody(await suite.call('PUT', path, { token, body: { url, threshold_pct: 50, thresholds_pct: [50] } }), 400, 'invalid_request', 'thresholds_pct');
    expectErrorBody(await suite.call('PUT', path, { token, body: { url, thresholds_pct: [50, 101] } }), 400, 'invalid_request', 'thresholds_pct[1]');
    expectErrorBody(await suite.call('PUT', path, { token, body: { url, thresholds_pct: [50, 50] } }), 400, 'invalid_request', 'thresholds_pct[1]');
    // An empty array is a 400, not the default (which is leaving thresholds_pct out).
    expectErrorBody(await suite.call('PUT', path, { token, body: { url, thresholds_pct: [] } }), 400, 'invalid_request', 'thresholds_pct');
    expectErrorBody(
      await suite.call('PUT', path, { token, body: { url, thresholds_pct: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] } }),
      400,
      'invalid_request',
      'thresholds_pct',
    );
    expect((await suite.call('DELETE', path, { token })).json).toMatchObject({ alert_thresholds_pct: [], alert_threshold_pct: null });
  });
});

describe('rotation', () => {
  it('answers 201 {full_key, key, previous}; both keys work during the grace period, then the old one is 401 api_key_expired', async () => {
    const owner = await signUp(suite.call);
    const old = await createKey(owner.token, {
      name: 'prod',
      scopes: ['inference', 'read'],
      rate_limits: { requests_per_minute: 100 },
      routing_policy: 'cn-only',
    });
    const rotated = await suite.call('POST', `/v1/keys/${old.key.key_id}/rotate`, { token: owner.token, body: { grace_period_seconds: 2 } });
    expect(rotated.status, rotated.text).toBe(201);
    expect(Object.keys(rotated.json).sort()).toEqual(['full_key', 'key', 'previous']);
    const { full_key: newFullKey, key, previous } = rotated.json;
    expect(newFullKey).toMatch(/^sb_[0-9A-Za-z]{49}$/);
    expect(Object.keys(key).sort()).toEqual(keyRecordFields);
    expect(key).toMatchObject({
      name: 'prod',
      scopes: ['inference', 'read'],
      rate_limits: { requests_per_minute: 100, tokens_per_minute: null, max_concurrent: null },
      routing_policy: 'cn-only',
      rotated_from: old.key.key_id,
      expires_at: null,
      created_by: owner.userId,
    });
    expect(previous).toMatchObject({ key_id: old.key.key_id, status: 'active', rotated_from: null });
    const graceEnd = Date.parse(previous.expires_at);
    expect(graceEnd - Date.now()).toBeLessThanOrEqual(2000);

    // Both credentials work during the grace period.
    for (const credential of [old.fullKey, newFullKey]) {
      const account = await suite.call('GET', '/v1/account', { token: credential });
      expect(account.status, account.text).toBe(200);
      expect(account.json.user_id).toBe(owner.userId);
    }
    const refused = await eventually(
      async () => {
        const response = await suite.call('GET', '/v1/account', { token: old.fullKey });
        return response.status === 401 ? response : undefined;
      },
      'the old key to expire',
      5000,
    );
    expect(Date.now()).toBeGreaterThanOrEqual(graceEnd);
    expectErrorBody(refused, 401, 'api_key_expired', null);
    expect((await suite.call('GET', '/v1/account', { token: newFullKey })).status).toBe(200);
    // Expired, the old key stays active in the record: status is about revocation.
    expect((await suite.call('GET', `/v1/keys/${old.key.key_id}`, { token: owner.token })).json.status).toBe('active');

    await eventually(
      () => eventsOf('key.rotated', key.key_id).length === 1 && eventsOf('key.updated', old.key.key_id as string).length === 1,
      'the rotation events',
    );
    expect(eventsOf('key.rotated', key.key_id)[0]).toEqual({
      key_id: key.key_id,
      workspace_id: owner.workspaceId,
      previous_key_id: old.key.key_id,
      previous_expires_at: expect.any(String),
      rotated_by: owner.userId,
    });
    expect(eventsOf('key.created', key.key_id)).toHaveLength(1);
    expect(eventsOf('key.updated', old.key.key_id as string)[0]).toMatchObject({ change: 'rotated', changed_fields: ['expires_at'] });
    await eventually(() => eventsOf('key.expired', old.key.key_id as string).length === 1, 'key.expired of the old key');

    // An expired key cannot be rotated again; the grace period is checked.
    expectErrorBody(await suite.call('POST', `/v1/keys/${old.key.key_id}/rotate`, { token: owner.token }), 409, 'key_revoked', null);
    for (const grace of [-1, 604_801, 1.5, '60']) {
      expectErrorBody(
        await suite.call('POST', `/v1/keys/${key.key_id}/rotate`, { token: owner.token, body: { grace_period_seconds: grace } }),
        400,
        undefined,
        'grace_period_seconds',
      );
    }
    const defaulted = await suite.call('POST', `/v1/keys/${key.key_id}/rotate`, { token: owner.token });
    expect(defaulted.status, defaulted.text).toBe(201);
    expect(Date.parse(defaulted.json.previous.expires_at) - Date.now()).toBeGreaterThan(86_400_000 - 60_000);
  });
});

describe('webhooks', () => {
  it('delivers key.rotated and key.expired to the endpoints subscribed to them', async () => {
    const owner = await signUp(suite.call);
    const hook = '/keys-ii';
    const endpoint = await suite.call('POST', `/v1/workspaces/${owner.workspaceId}/webhooks`, {
      token: owner.token,
      body: { url: receiver.url(hook), events: ['key.rotated', 'key.expired'] },
    });
    expect(endpoint.status, endpoint.text).toBe(201);
    const { key } = await createKey(owner.token);
    const rotated = await suite.call('POST', `/v1/keys/${key.key_id}/rotate`, { token: owner.token, body: { grace_period_seconds: 0 } });
    expect(rotated.status, rotated.text).toBe(201);
    const delivered = await eventually(() => (receiver.at(hook).length >= 2 ? receiver.at(hook) : undefined), 'both deliveries', 10_000);
    const events = delivered.map((request) => verifyDelivery(endpoint.json.secret, request) as { type: string; data: Record<string, unknown> });
    expect(events.map((event) => event.type).sort()).toEqual(['key.expired', 'key.rotated']);
    expect(events.find((event) => event.type === 'key.rotated')!.data).toMatchObject({ key_id: rotated.json.key.key_id, previous_key_id: key.key_id });
    expect(events.find((event) => event.type === 'key.expired')!.data).toMatchObject({ key_id: key.key_id, workspace_id: owner.workspaceId });
  });
});

describe('expiry', () => {
  it('refuses a key with 401 api_key_expired once its expires_at passes, and announces key.expired once', async () => {
    const { token } = await signUp(suite.call);
    const expiresAt = new Date(Date.now() + 1500);
    const { fullKey, key } = await createKey(token, { name: 'short', expires_at: expiresAt.toISOString() });
    expect((await suite.call('GET', '/v1/account', { token: fullKey })).status).toBe(200);
    const refused = await eventually(
      async () => {
        const response = await suite.call('GET', '/v1/account', { token: fullKey });
        return response.status === 401 ? response : undefined;
      },
      'the key to expire',
      5000,
    );
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAt.getTime());
    expectErrorBody(refused, 401, 'api_key_expired', null);
    await eventually(() => eventsOf('key.expired', key.key_id as string).length === 1, 'key.expired');
    expect(eventsOf('key.expired', key.key_id as string)[0]).toEqual({ key_id: key.key_id, workspace_id: expect.any(String), expired_at: expect.any(String) });
  });
});

describe('GET /v1/key', () => {
  it('describes the API key of the request; a user token is a 400 api_key_required', async () => {
    const { token } = await signUp(suite.call);
    const { fullKey, key } = await createKey(token, {
      name: 'me',
      scopes: ['inference'],
      allowed_models: ['service/*'],
      rate_limits: { requests_per_minute: 60 },
    });
    const current = await suite.call('GET', '/v1/key', { token: fullKey });
    expect(current.status, current.text).toBe(200);
    expect(current.json).toEqual({
      key_id: key.key_id,
      name: 'me',
      scopes: ['inference'],
      expires_at: null,
      allowed_models: ['service/*'],
      rate_limits: { requests_per_minute: 60, tokens_per_minute: null, max_concurrent: null },
      routing_policy: 'any',
      spend: [],
    });
    expectErrorBody(await suite.call('GET', '/v1/key', { token }), 400, 'api_key_required', null);
  });
});

describe('the scopes of a key', () => {
  it('lets a manage key create a key with scopes it has, and refuses one it lacks (403 insufficient_scope)', async () => {
    const { token } = await signUp(suite.call);
    const { fullKey } = await createKey(token, { name: 'manager', scopes: ['inference', 'manage'] });
    const narrow = await suite.call('POST', '/v1/keys', { token: fullKey, body: { name: 'narrow', scopes: ['inference'] } });
    expect(narrow.status, narrow.text).toBe(201);
    const wide = await suite.call('POST', '/v1/keys', { token: fullKey, body: { name: 'wide' } });
    expectErrorBody(wide, 403, 'insufficient_scope', null);
    expect(wide.json.error.metadata).toEqual({ required_scope: 'read' });
  });

  it('refuses a key creation to an inference-only key (403 insufficient_scope, required_scope manage)', async () => {
    const { token } = await signUp(suite.call);
    const { fullKey } = await createKey(token, { name: 'inference only', scopes: ['inference'] });
    const refused = await suite.call('POST', '/v1/keys', { token: fullKey, body: { name: 'child', scopes: ['inference'] } });
    expectErrorBody(refused, 403, 'insufficient_scope', null);
    expect(refused.json.error.metadata).toEqual({ required_scope: 'manage' });
  });
});

describe('tenant isolation', () => {
  it("answers 404 for another workspace's key on every new route, and leaves it as it was", async () => {
    const owner = await signUp(suite.call);
    const stranger = await signUp(suite.call);
    const { key } = await createKey(owner.token, { name: 'mine', scopes: ['read'] });
    const id = key.key_id as string;
    const attempts: Array<[string, string, unknown?]> = [
      ['PATCH', `/v1/keys/${id}`, { scopes: ['inference'] }],
      ['PATCH', `/v1/keys/${id}`, { expires_at: inAnHour(), rate_limits: null }],
      ['PATCH', `/v1/keys/${id}`, { allowed_models: [''] }],
      ['PUT', `/v1/keys/${id}/spend-limits`, { spend_limits: [] }],
      ['PUT', `/v1/keys/${id}/alert-webhook`, { url: 'https://evil.example.com', thresholds_pct: [10] }],
      ['POST', `/v1/keys/${id}/rotate`, { grace_period_seconds: 0 }],
    ];
    const responses: ApiResponse[] = [];
    for (const [method, path, body] of attempts) responses.push(await suite.call(method, path, { token: stranger.token, body }));
    for (const response of responses) {
      expectErrorBody(response, 404, 'key_not_found', null);
      expect(response.text).not.toContain('mine');
    }
    expect((await suite.call('GET', `/v1/keys/${id}`, { token: owner.token })).json).toEqual(key);
    expect((await suite.call('GET', '/v1/keys', { token: owner.token })).json.data).toHaveLength(1);
  });
});
