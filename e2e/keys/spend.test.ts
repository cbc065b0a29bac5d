import { timestampDate } from '@bufbuild/protobuf/wkt';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import type { EventEnvelopeJson } from '@switchboard/runtime/consumer';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { EventBus } from '@switchboard/testkit/events';
import { Mailbox } from '@switchboard/testkit/mailbox';
import { bootMesh, expectErrorBody, restClient, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Spend, caps, reservations and revocations driven by events (docs/api/keys.md#reservations, docs/api/billing.md#usage-ingestion): usage arrives as
 * billing's `billing.usage.recorded` events on the real stream (billing publishes them once it
 * prices a generation), identity's events revoke keys, and the data plane asks AuthorizeKey.
 */

let mesh: Mesh;
let call: ReturnType<typeof restClient>;
let bus: EventBus;
let mailbox: Mailbox;
let dataPlane: ReturnType<typeof meshClient<typeof KeyService>>;

beforeAll(async () => {
  // Long enough for 200 reservations of one key, serialized by its row lock, to be taken on a slow machine.
  mesh = await bootMesh({ RESERVATION_TTL: '8s' });
  call = restClient(mesh.gatewayUrl);
  bus = await EventBus.connect();
  mailbox = new Mailbox(mesh.env.MAILBOX_DIR);
  dataPlane = meshClient(KeyService, mesh.urls.keys, 'keys', { caller: 'data-plane' });
});

afterAll(async () => {
  await bus?.close();
  await mesh?.stop();
});

type User = SignedUp;

async function createKey(token: string, body: Record<string, unknown>, workspaceId?: string): Promise<{ fullKey: string; keyId: string }> {
  const response = await call('POST', '/v1/keys', { token, body, headers: workspaceId ? { 'x-workspace-id': workspaceId } : {} });
  expect(response.status, response.text).toBe(201);
  return { fullKey: response.json.full_key, keyId: response.json.key.key_id };
}

let generation = 0;
/** What billing publishes after pricing one generation (data of billing.v1 UsageRecorded). */
function usage(keyId: string, workspaceId: string, costUsd: string, extra: Record<string, string> = {}) {
  generation += 1;
  return {
    usage_id: `usg_test${generation}`,
    generation_id: `gen_test${generation}`,
    key_id: keyId,
    workspace_id: workspaceId,
    model: 'service/fast',
    tier: 'fast',
    cost_usd: costUsd,
    input_tokens: '100',
    output_tokens: '50',
    occurred_at: new Date().toISOString(),
    balance_usd: '100.00',
    ...extra,
  };
}

const spendOf = async (token: string, keyId: string, workspaceId?: string) =>
  (await call('GET', `/v1/keys/${keyId}`, { token, headers: workspaceId ? { 'x-workspace-id': workspaceId } : {} })).json.month_to_date_spend_usd as string;

const waitForSpend = (token: string, keyId: string, expected: string) =>
  eventually(async () => (await spendOf(token, keyId)) === expected, `month-to-date spend ${expected}`, 15_000);

const thisMonth = () => new Date().toISOString().slice(0, 7);
const nextMonthStart = () => {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString();
};

describe('month-to-date spend, alerts and the cap', () => {
  it('alerts once at the threshold and once at the cap, then blocks with 402 until the cap is raised', async () => {
    const user = await signUp(call);
    const { fullKey, keyId } = await createKey(user.token, { name: 'alerting', monthly_spend_cap_usd: '10.00' });
    const hook = await call('PUT', `/v1/keys/${keyId}/alert-webhook`, {
      token: user.token,
      body: { url: 'https://alerts.example.com/spend', threshold_pct: 80 },
    });
    expect(hook.status).toBe(200);
    const keyEvents = bus.observe('key.>');
    await bus.flush();

    // 3 + 3 + 2.5 = 8.5 crosses 80% (8.00); + 1 + 0.5 = 10 reaches the cap. Each event arrives twice.
    for (const cost of ['3.00', '3.00', '2.50', '1.00', '0.50']) {
      await bus.publish('billing.usage.recorded', user.workspaceId, usage(keyId, user.workspaceId, cost), { redeliver: true });
      if (cost === '2.50') await waitForSpend(user.token, keyId, '8.5');
    }
    await waitForSpend(user.token, keyId, '10');

    const blocked = await eventually(async () => {
      const response = await call('GET', '/v1/account', { token: fullKey });
      return response.status === 402 ? response : undefined;
    }, 'the REST call to be refused');
    expectErrorBody(blocked, 402, 'spend_cap_exceeded', null);
    expect(blocked.json.error.metadata).toEqual({ scope: 'key', period: 'month', cap_usd: '10.00', spend_usd: '10', resets_at: nextMonthStart() });
    expect(blocked.text).not.toContain(fullKey);

    const answer = await dataPlane.authorizeKey({ fullKey });
    expect(answer).toMatchObject({ allowed: false, reason: 'spend_cap_exceeded', keyId, workspaceId: user.workspaceId, capUsd: '10.00', spendUsd: '10' });
    expect(timestampDate(answer.resetsAt!).toISOString()).toBe(nextMonthStart());

    // Exactly one alert per threshold: a later event of the keys service (in outbox order) proves none is still coming.
    expect((await call('PATCH', `/v1/keys/${keyId}`, { token: user.token, body: { name: 'alerting (renamed)' } })).status).toBe(200);
    await eventually(() => keyEvents.some((e) => e.type === 'key.updated' && e.data.change === 'name'), 'the rename event');
    const alerts = keyEvents.filter((e: EventEnvelopeJson) => e.type === 'key.spend_alert');
    expect(alerts.map((e) => e.data)).toEqual([
      {
        key_id: keyId,
        workspace_id: user.workspaceId,
        month: thisMonth(),
        threshold_pct: 80,
        spend_usd: '8.5',
        cap_usd: '10.00',
        alert_url: 'https://alerts.example.com/spend',
        period: 'month',
        period_start: `${thisMonth()}-01`,
      },
      {
        key_id: keyId,
        workspace_id: user.workspaceId,
        month: thisMonth(),
        threshold_pct: 100,
        spend_usd: '10',
        cap_usd: '10.00',
        alert_url: 'https://alerts.example.com/spend',
        period: 'month',
        period_start: `${thisMonth()}-01`,
      },
    ]);
    expect(alerts.every((e) => e.workspace_id === user.workspaceId)).toBe(true);
    expect(keyEvents.filter((e) => e.type === 'key.updated' && e.data.change === 'cap_reached')).toHaveLength(1);

    // Raising the cap lifts the block at once, on REST and for the data plane.
    expect((await call('PATCH', `/v1/keys/${keyId}/spend-cap`, { token: user.token, body: { monthly_spend_cap_usd: '20' } })).status).toBe(200);
    expect((await call('GET', '/v1/account', { token: fullKey })).status).toBe(200);
    await eventually(async () => (await dataPlane.authorizeKey({ fullKey })).allowed, 'AuthorizeKey to allow the key again', 2000);
  });

  it('sums 200 parallel usage events exactly, ignoring their redeliveries', async () => {
    const user = await signUp(call);
    const { keyId } = await createKey(user.token, { name: 'busy' });
    // 0.000001 × (1 + 2 + … + 200) = 0.0201: every event has another cost, so a lost or doubled one shows.
    await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        bus.publish('billing.usage.recorded', user.workspaceId, usage(keyId, user.workspaceId, `0.${String(i + 1).padStart(6, '0')}`), { redeliver: true }),
      ),
    );
    await waitForSpend(user.token, keyId, '0.0201');
    // Usage of another month counts there, not in this one.
    await bus.publish('billing.usage.recorded', user.workspaceId, usage(keyId, user.workspaceId, '5', { occurred_at: '2020-01-15T12:00:00Z' }));
    await bus.publish('billing.usage.recorded', user.workspaceId, usage(keyId, user.workspaceId, '0.0001'));
    await waitForSpend(user.token, keyId, '0.0202');
  });
});

describe('reservations', () => {
  it('allows exactly 33 of 200 parallel reservations of 0.30 under a 10.00 cap, settles them by usage, and releases the unused ones', async () => {
    const user = await signUp(call);
    const { fullKey, keyId } = await createKey(user.token, { name: 'reserved', monthly_spend_cap_usd: '10.00' });
    const answers = await Promise.all(Array.from({ length: 200 }, () => dataPlane.authorizeKey({ fullKey, estimatedCostUsd: '0.30' })));
    const allowed = answers.filter((a) => a.allowed);
    expect(allowed).toHaveLength(33);
    expect(new Set(allowed.map((a) => a.reservationId)).size).toBe(33);
    for (const refused of answers.filter((a) => !a.allowed)) expect(refused).toMatchObject({ reason: 'spend_cap_exceeded', capUsd: '10.00', spendUsd: '9.9' });

    // One reservation settled at 0.10: spend 0.10 + 32 × 0.30 open = 9.70, so one more 0.30 fits.
    await bus.publish('billing.usage.recorded', user.workspaceId, usage(keyId, user.workspaceId, '0.10', { reservation_id: allowed[0].reservationId! }));
    await waitForSpend(user.token, keyId, '0.1');
    expect((await dataPlane.authorizeKey({ fullKey, estimatedCostUsd: '0.30' })).allowed).toBe(true);
    expect((await dataPlane.authorizeKey({ fullKey, estimatedCostUsd: '0.30' })).allowed).toBe(false);
    // Unused reservations are released after RESERVATION_TTL (10 minutes; 8 s in this suite).
    await eventually(
      async () => (await dataPlane.authorizeKey({ fullKey, estimatedCostUsd: '9.90' })).allowed,
      'the unused reservations to expire',
      20_000,
      250,
    );
  });

  it('answers unknown, revoked and bad estimates for the data plane', async () => {
    const user = await signUp(call);
    const { fullKey, keyId } = await createKey(user.token, { name: 'dp', routing_policy: 'cn-only' });
    expect(await dataPlane.authorizeKey({ fullKey })).toMatchObject({
      allowed: true,
      reason: '',
      keyId,
      workspaceId: user.workspaceId,
      routingPolicy: 'cn-only',
    });
    const noCap = await dataPlane.authorizeKey({ fullKey, estimatedCostUsd: '1000' });
    expect(noCap).toMatchObject({ allowed: true, reservationId: expect.stringMatching(/^rsv_/) });
    expect(await dataPlane.authorizeKey({ fullKey: `${fullKey.slice(0, -1)}${fullKey.endsWith('a') ? 'b' : 'a'}` })).toMatchObject({
      allowed: false,
      reason: 'unknown',
      keyId: '',
    });
    await expect(dataPlane.authorizeKey({ fullKey, estimatedCostUsd: '-1' })).rejects.toThrow(/estimated_cost_usd/);
    await call('DELETE', `/v1/keys/${keyId}`, { token: user.token });
    await eventually(async () => (await dataPlane.authorizeKey({ fullKey })).reason === 'revoked', 'the revocation to reach AuthorizeKey', 1000, 10);
  });
});

describe('balances', () => {
  it('answers insufficient_balance to the data plane at zero or below, never to management calls', async () => {
    const user = await signUp(call);
    const { fullKey, keyId } = await createKey(user.token, { name: 'prepaid' });
    const t0 = Date.now();
    await bus.publish('billing.usage.recorded', user.workspaceId, usage(keyId, user.workspaceId, '1.00', { balance_usd: '0.00' }), {
      occurredAt: new Date(t0),
    });
    await eventually(async () => (await dataPlane.authorizeKey({ fullKey })).reason === 'insufficient_balance', 'insufficient_balance');
    expect((await call('GET', '/v1/keys', { token: fullKey })).status).toBe(200);
    // A credit (billing.balance.changed, which every top-up's ledger entry emits).
    await bus.publish(
      'billing.balance.changed',
      user.workspaceId,
      { workspace_id: user.workspaceId, entry_id: 'led_test', type: 'topup', amount_usd: '5.00', balance_usd: '5.00' },
      { occurredAt: new Date(t0 + 2000) },
    );
    await eventually(async () => (await dataPlane.authorizeKey({ fullKey })).allowed, 'the top-up to reach AuthorizeKey');
    // A report older than the one kept changes nothing (events may arrive out of order).
    await bus.publish('billing.usage.recorded', user.workspaceId, usage(keyId, user.workspaceId, '0.01', { balance_usd: '-1.00' }), {
      occurredAt: new Date(t0 + 1000),
    });
    await waitForSpend(user.token, keyId, '1.01');
    expect((await dataPlane.authorizeKey({ fullKey })).allowed).toBe(true);
  });
});

describe("revocations from identity's events", () => {
  async function organizationWith(owner: User, member: User): Promise<string> {
    const name = `Org ${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
    const created = await call('POST', '/v1/organizations', { token: owner.token, body: { name } });
    const orgId = created.json.organization.org_id as string;
    expect(
      (await call('POST', `/v1/organizations/${orgId}/invitations`, { token: owner.token, body: { email: member.email, role: 'developer' } })).status,
    ).toBe(201);
    const token = await mailbox.invitationToken(member.email, name);
    expect((await call('POST', '/v1/invitations/accept', { token: member.token, body: { token } })).status).toBe(200);
    return orgId;
  }

  const statusOf = async (credential: string) => (await call('GET', '/v1/keys', { token: credential })).status;

  it("revokes a removed member's keys in that organization only", async () => {
    const owner = await signUp(call);
    const member = await signUp(call);
    const orgId = await organizationWith(owner, member);
    const memberOrgKey = await createKey(member.token, { name: 'in org' }, orgId);
    const memberPersonalKey = await createKey(member.token, { name: 'personal' });
    const ownerOrgKey = await createKey(owner.token, { name: 'owner in org' }, orgId);
    expect(await statusOf(memberOrgKey.fullKey)).toBe(200);

    const keyEvents = bus.observe('key.revoked');
    await bus.flush();
    expect((await call('DELETE', `/v1/organizations/${orgId}/members/${member.userId}`, { token: owner.token })).status).toBe(204);
    await eventually(async () => (await statusOf(memberOrgKey.fullKey)) === 401, "the removed member's key to be refused", 10_000);
    const record = await call('GET', `/v1/keys/${memberOrgKey.keyId}`, { token: owner.token, headers: { 'x-workspace-id': orgId } });
    expect(record.json).toMatchObject({ status: 'revoked', created_by: member.userId });
    expect(await statusOf(memberPersonalKey.fullKey)).toBe(200);
    expect(await statusOf(ownerOrgKey.fullKey)).toBe(200);
    await eventually(() => keyEvents.length === 1, 'the key.revoked event');
    expect(keyEvents[0].data).toEqual({ key_id: memberOrgKey.keyId, workspace_id: orgId, revoked_by: owner.userId, reason: 'member_removed' });
  });

  it("revokes a deleted organization's keys, and a deactivated user's keys everywhere", async () => {
    const owner = await signUp(call);
    const member = await signUp(call);
    const orgId = await organizationWith(owner, member);
    const ownerOrgKey = await createKey(owner.token, { name: 'org' }, orgId);
    const ownerPersonalKey = await createKey(owner.token, { name: 'personal' });
    const memberOrgKey = await createKey(member.token, { name: 'member org' }, orgId);
    const memberPersonalKey = await createKey(member.token, { name: 'member personal' });

    expect((await call('DELETE', `/v1/organizations/${orgId}`, { token: owner.token })).status).toBe(204);
    await eventually(
      async () => (await statusOf(ownerOrgKey.fullKey)) === 401 && (await statusOf(memberOrgKey.fullKey)) === 401,
      "the organization's keys to be refused",
    );
    expect(await statusOf(ownerPersonalKey.fullKey)).toBe(200);
    expect(await statusOf(memberPersonalKey.fullKey)).toBe(200);

    const deactivated = await call('POST', '/v1/account/deactivate', { token: member.token, body: { password: member.password } });
    expect(deactivated.status, deactivated.text).toBe(202);
    // The gateway refuses a deactivated account at once; the key itself is revoked when keys hears user.deactivated.
    await eventually(
      async () => (await dataPlane.authorizeKey({ fullKey: memberPersonalKey.fullKey })).reason === 'revoked',
      "the deactivated user's key to be revoked",
    );
    expect(await statusOf(memberPersonalKey.fullKey)).toBe(401);
    expect(await statusOf(ownerPersonalKey.fullKey)).toBe(200);
  });
});
