import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { eventually } from '@switchboard/runtime/testing';
import { EventBus } from '@switchboard/testkit/events';
import { Mailbox } from '@switchboard/testkit/mailbox';
import { bootMesh, expectErrorBody, restClient, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Periodic budgets through the REST surface (docs/api/keys.md#workspace-budgets,
 * docs/api/keys.md#periodic-budgets): the workspace's limits (owners and admins change them,
 * every member reads them), their validation, and the spend of each period as billing's
 * `billing.usage.recorded` events arrive.
 */

let mesh: Mesh;
let call: ReturnType<typeof restClient>;
let bus: EventBus;
let mailbox: Mailbox;

beforeAll(async () => {
  mesh = await bootMesh();
  call = restClient(mesh.gatewayUrl);
  bus = await EventBus.connect();
  mailbox = new Mailbox(mesh.env.MAILBOX_DIR);
});

afterAll(async () => {
  await bus?.close();
  await mesh?.stop();
});

const path = '/v1/billing/spend-limits';
const inWorkspace = (workspaceId: string) => ({ 'x-workspace-id': workspaceId });

/** An organization of `owner` with `member` joined in `role` (the invitation read from the mailbox). */
async function organizationWith(owner: SignedUp, members: Array<{ user: SignedUp; role: string }>): Promise<string> {
  const name = `Org ${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const created = await call('POST', '/v1/organizations', { token: owner.token, body: { name } });
  expect(created.status, created.text).toBe(201);
  const orgId = created.json.organization.org_id as string;
  for (const { user, role } of members) {
    const invited = await call('POST', `/v1/organizations/${orgId}/invitations`, { token: owner.token, body: { email: user.email, role } });
    expect(invited.status, invited.text).toBe(201);
    const token = await mailbox.invitationToken(user.email, name);
    const accepted = await call('POST', '/v1/invitations/accept', { token: user.token, body: { token } });
    expect(accepted.status, accepted.text).toBe(200);
  }
  return orgId;
}

let generation = 0;
/** What billing publishes after pricing one generation (data of billing.v1 UsageRecorded). */
function usage(keyId: string, workspaceId: string, costUsd: string, occurredAt = new Date()) {
  generation += 1;
  return {
    usage_id: `usg_budget${generation}`,
    generation_id: `gen_budget${Date.now().toString(36)}${generation}`,
    key_id: keyId,
    workspace_id: workspaceId,
    model: 'service/fast',
    tier: 'fast',
    cost_usd: costUsd,
    input_tokens: '100',
    output_tokens: '50',
    occurred_at: occurredAt.toISOString(),
    balance_usd: '100.00',
  };
}

/** RFC 3339 as the API writes it: whole seconds. */
const rfc3339 = (at: number) => new Date(at).toISOString().replace('.000Z', 'Z');
const dayEnd = () => {
  const now = new Date();
  return rfc3339(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
};
const monthEnd = () => {
  const now = new Date();
  return rfc3339(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
};

describe('workspace budgets', () => {
  it('owners and admins replace them, every member reads them, a developer may not change them', async () => {
    const [owner, admin, developer] = [await signUp(call), await signUp(call), await signUp(call)];
    const orgId = await organizationWith(owner, [
      { user: admin, role: 'admin' },
      { user: developer, role: 'developer' },
    ]);
    const headers = inWorkspace(orgId);
    expect((await call('GET', path, { token: owner.token, headers })).json).toEqual({ spend_limits: [] });

    const set = await call('PUT', path, {
      token: owner.token,
      headers,
      body: {
        spend_limits: [
          { period: 'total', amount_usd: '1000' },
          { period: 'day', amount_usd: '5.00' },
        ],
      },
    });
    expect(set.status, set.text).toBe(200);
    expect(set.json).toEqual({
      spend_limits: [
        { period: 'day', amount_usd: '5.00', spend_usd: '0', remaining_usd: '5', resets_at: dayEnd() },
        { period: 'total', amount_usd: '1000', spend_usd: '0', remaining_usd: '1000', resets_at: null },
      ],
    });

    const byAdmin = await call('PUT', path, { token: admin.token, headers, body: { spend_limits: [{ period: 'month', amount_usd: '50' }] } });
    expect(byAdmin.status, byAdmin.text).toBe(200);
    expect(byAdmin.json.spend_limits).toEqual([{ period: 'month', amount_usd: '50', spend_usd: '0', remaining_usd: '50', resets_at: monthEnd() }]);

    const read = await call('GET', path, { token: developer.token, headers });
    expect(read.status, read.text).toBe(200);
    expect(read.json).toEqual(byAdmin.json);
    const refused = await call('PUT', path, { token: developer.token, headers, body: { spend_limits: [] } });
    expectErrorBody(refused, 403, 'forbidden');
    expect((await call('GET', path, { token: owner.token, headers })).json).toEqual(byAdmin.json);

    // An empty list removes them all; another workspace (the owner's personal one) has its own.
    expect((await call('PUT', path, { token: owner.token, headers, body: { spend_limits: [] } })).json).toEqual({ spend_limits: [] });
    expect((await call('GET', path, { token: admin.token })).json).toEqual({ spend_limits: [] });
  });

  it('refuse invalid limits with 400 naming the field, and change nothing', async () => {
    const owner = await signUp(call);
    const put = (spendLimits: unknown) => call('PUT', path, { token: owner.token, body: { spend_limits: spendLimits } });
    expect((await put([{ period: 'week', amount_usd: '7' }])).status).toBe(200);
    const cases: Array<[unknown, string]> = [
      [[{ period: 'day', amount_usd: 5 }], 'spend_limits[0].amount_usd'],
      [
        [
          { period: 'day', amount_usd: '5' },
          { period: 'week', amount_usd: '1e3' },
        ],
        'spend_limits[1].amount_usd',
      ],
      [[{ period: 'day', amount_usd: '-1' }], 'spend_limits[0].amount_usd'],
      [[{ period: 'day' }], 'spend_limits[0].amount_usd'],
      [[{ period: 'hour', amount_usd: '1' }], 'spend_limits[0].period'],
      [
        [
          { period: 'day', amount_usd: '1' },
          { period: 'day', amount_usd: '2' },
        ],
        'spend_limits[1].period',
      ],
      [['day', 'week', 'month', 'total', 'day'].map((period) => ({ period, amount_usd: '1' })), 'spend_limits'],
    ];
    for (const [spendLimits, field] of cases) expectErrorBody(await put(spendLimits), 400, 'invalid_request', field);
    expect((await call('GET', path, { token: owner.token })).json.spend_limits).toEqual([expect.objectContaining({ period: 'week', amount_usd: '7' })]);
  });

  it('show the spend of each period of every key of the workspace, usage of another day counting there', async () => {
    const owner = await signUp(call);
    const limits = [
      { period: 'day', amount_usd: '10' },
      { period: 'month', amount_usd: '100' },
      { period: 'total', amount_usd: '1000' },
    ];
    expect((await call('PUT', path, { token: owner.token, body: { spend_limits: limits } })).status).toBe(200);
    const keys = await Promise.all(
      ['a', 'b'].map(async (name) => (await call('POST', '/v1/keys', { token: owner.token, body: { name } })).json.key.key_id as string),
    );
    const now = new Date();
    const twoDaysAgo = new Date(now.getTime() - 2 * 86_400_000);
    await bus.publish('billing.usage.recorded', owner.workspaceId, usage(keys[0], owner.workspaceId, '1.25'), { redeliver: true });
    await bus.publish('billing.usage.recorded', owner.workspaceId, usage(keys[1], owner.workspaceId, '0.5'), { redeliver: true });
    await bus.publish('billing.usage.recorded', owner.workspaceId, usage(keys[1], owner.workspaceId, '3', twoDaysAgo));
    const sameMonth = twoDaysAgo.getUTCMonth() === now.getUTCMonth();
    const statuses = await eventually(
      async () => {
        const { json } = await call('GET', path, { token: owner.token });
        return json.spend_limits[2].spend_usd === '4.75' && json.spend_limits;
      },
      'the spend of the usage',
      15_000,
    );
    expect(statuses).toEqual([
      { period: 'day', amount_usd: '10', spend_usd: '1.75', remaining_usd: '8.25', resets_at: dayEnd() },
      {
        period: 'month',
        amount_usd: '100',
        spend_usd: sameMonth ? '4.75' : '1.75',
        remaining_usd: sameMonth ? '95.25' : '98.25',
        resets_at: monthEnd(),
      },
      { period: 'total', amount_usd: '1000', spend_usd: '4.75', remaining_usd: '995.25', resets_at: null },
    ]);
  });
});

// MERGE: needs B1's PUT /v1/keys/{key_id}/spend-limits and the key record's spend_limits (built on budgetStatuses).
describe('periodic budgets of a key', () => {
  it('the key record shows the spend and reset of each period after usage', async () => {
    const owner = await signUp(call);
    const created = await call('POST', '/v1/keys', { token: owner.token, body: { name: 'periodic' } });
    expect(created.status, created.text).toBe(201);
    const keyId = created.json.key.key_id as string;
    const limits = [
      { period: 'day', amount_usd: '2.00' },
      { period: 'month', amount_usd: '20' },
    ];
    const set = await call('PUT', `/v1/keys/${keyId}/spend-limits`, { token: owner.token, body: { spend_limits: limits } });
    expect(set.status, set.text).toBe(200);
    expect(set.json.monthly_spend_cap_usd).toBe('20');
    await bus.publish('billing.usage.recorded', owner.workspaceId, usage(keyId, owner.workspaceId, '0.75'), { redeliver: true });
    const record = await eventually(
      async () => {
        const { json } = await call('GET', `/v1/keys/${keyId}`, { token: owner.token });
        return json.month_to_date_spend_usd === '0.75' && json;
      },
      'the spend of the usage',
      15_000,
    );
    expect(record.spend_limits).toEqual([
      { period: 'day', amount_usd: '2.00', spend_usd: '0.75', remaining_usd: '1.25', resets_at: dayEnd() },
      { period: 'month', amount_usd: '20', spend_usd: '0.75', remaining_usd: '19.25', resets_at: monthEnd() },
    ]);
  });
});
