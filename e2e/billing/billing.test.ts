import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError } from '@connectrpc/connect';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { bootMesh, expectErrorBody, newUser, restClient } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Billing through its real paths (docs/api/billing.md#tiers-and-prices): usage recorded by the data plane over RPC, priced per
 * tier with exact decimals, debited and reported through REST; top-ups through the sandbox
 * provider, idempotent under concurrency.
 */

let mesh: Mesh;
let call: ReturnType<typeof restClient>;
let dataPlane: ReturnType<typeof meshClient<typeof UsageService>>;
let keysDataPlane: ReturnType<typeof meshClient<typeof KeyService>>;

beforeAll(async () => {
  mesh = await bootMesh();
  call = restClient(mesh.gatewayUrl);
  dataPlane = meshClient(UsageService, mesh.urls.billing, 'billing', { caller: 'data-plane' });
  keysDataPlane = meshClient(KeyService, mesh.urls.keys, 'keys', { caller: 'data-plane' });
});

afterAll(async () => {
  await mesh?.stop();
});

interface Workspace {
  token: string;
  workspaceId: string;
  keyId: string;
  fullKey: string;
}

async function workspaceWithKey(): Promise<Workspace> {
  const registered = await call('POST', '/v1/auth/register', { body: newUser() });
  expect(registered.status, registered.text).toBe(201);
  const token = registered.json.session.access_token;
  const key = await call('POST', '/v1/keys', { token, body: { name: 'data plane' } });
  expect(key.status, key.text).toBe(201);
  return { token, workspaceId: registered.json.user.personal_workspace_id, keyId: key.json.key.key_id, fullKey: key.json.full_key };
}

let generation = 0;
function usage(ws: Workspace, fields: Partial<Parameters<typeof dataPlane.recordUsage>[0]> = {}) {
  generation += 1;
  return {
    generationId: `gen_${Date.now().toString(36)}_${generation}`,
    keyId: ws.keyId,
    workspaceId: ws.workspaceId,
    model: 'service/fast',
    inputTokens: 1000n,
    outputTokens: 500n,
    ...fields,
  };
}

describe('recording usage', () => {
  it('prices each tier exactly and debits the balance', async () => {
    const ws = await workspaceWithKey();
    expect((await call('GET', '/v1/billing/balance', { token: ws.token })).json).toMatchObject({ balance_usd: '1.00', currency: 'USD' });
    // fast: 1000 × 0.10/1M + 500 × 0.40/1M = 0.0001 + 0.0002 = 0.0003
    expect(await dataPlane.recordUsage(usage(ws))).toMatchObject({
      costUsd: '0.0003',
      tier: 'fast',
      duplicate: false,
      usageId: expect.stringMatching(/^usg_/),
    });
    // balanced: 1000 × 0.50/1M + 500 × 2.00/1M = 0.0005 + 0.001 = 0.0015
    expect(await dataPlane.recordUsage(usage(ws, { model: 'service/balanced' }))).toMatchObject({ costUsd: '0.0015', tier: 'balanced' });
    // passthrough: 0.1 × 1.05 = 0.105
    expect(await dataPlane.recordUsage(usage(ws, { model: 'acme/large', upstreamCostUsd: '0.1' }))).toMatchObject({ costUsd: '0.105', tier: 'passthrough' });
    // byok: 5% of 0.2, whatever the model.
    expect(await dataPlane.recordUsage(usage(ws, { model: 'service/fast', upstreamCostUsd: '0.2', byok: true }))).toMatchObject({
      costUsd: '0.01',
      tier: 'byok',
    });
    // 1.00 − 0.0003 − 0.0015 − 0.105 − 0.01 = 0.8832
    expect((await call('GET', '/v1/billing/balance', { token: ws.token })).json.balance_usd).toBe('0.8832');
    const byTier = await call('GET', '/v1/billing/usage/by-tier', { token: ws.token });
    expect(byTier.json).toEqual({
      days: 30,
      by_tier: {
        fast: { cost_usd: '0.0003', requests: 1 },
        balanced: { cost_usd: '0.0015', requests: 1 },
        passthrough: { cost_usd: '0.105', requests: 1 },
        byok: { cost_usd: '0.01', requests: 1 },
      },
    });
    // Today's entry of the daily report splits the same usage per tier.
    const today = await call('GET', '/v1/billing/usage?days=1', { token: ws.token });
    expect(today.json.data).toEqual([expect.objectContaining({ cost_usd: '0.1168', requests: 4, by_tier: byTier.json.by_tier })]);
    // The keys service counts the same cost towards the key's month.
    await eventually(async () => (await call('GET', `/v1/keys/${ws.keyId}`, { token: ws.token })).json.month_to_date_spend_usd === '0.1168', 'the key spend');
  });

  it('charges 10 identical concurrent calls once, and 50 different ones to the exact sum', async () => {
    const ws = await workspaceWithKey();
    const same = usage(ws, { model: 'acme/x', upstreamCostUsd: '0.1' });
    const answers = await Promise.all(Array.from({ length: 10 }, () => dataPlane.recordUsage(same)));
    expect(answers.filter((a) => !a.duplicate)).toHaveLength(1);
    expect(new Set(answers.map((a) => a.usageId)).size).toBe(1);
    expect(answers.every((a) => a.costUsd === '0.105')).toBe(true);
    // 50 × 0.1 and 0.2 alternately, priced × 1.05: 25 × 0.105 + 25 × 0.21 = 7.875
    await Promise.all(
      Array.from({ length: 50 }, (_, i) => dataPlane.recordUsage(usage(ws, { model: 'acme/x', upstreamCostUsd: i % 2 === 0 ? '0.1' : '0.2' }))),
    );
    // 1.00 − 0.105 − 7.875 = −6.98: the balance may go below zero (the data plane then stops).
    expect((await call('GET', '/v1/billing/balance', { token: ws.token })).json.balance_usd).toBe('-6.980');
    await eventually(async () => (await keysDataPlane.authorizeKey({ fullKey: ws.fullKey })).reason === 'insufficient_balance', 'insufficient_balance');
    expect((await call('GET', '/v1/billing/balance', { token: ws.fullKey })).status).toBe(200);
    // A top-up that lifts the balance above zero lets the data plane in again.
    const topup = await call('POST', '/v1/billing/topup', { token: ws.token, body: { amount_usd: '10', idempotency_key: 'lift' } });
    expect((await call('POST', `${new URL(topup.json.checkout_url).pathname}/complete`)).json.status).toBe('completed');
    expect((await call('GET', '/v1/billing/balance', { token: ws.token })).json.balance_usd).toBe('3.020');
    await eventually(async () => (await keysDataPlane.authorizeKey({ fullKey: ws.fullKey })).allowed, 'the top-up to reach AuthorizeKey');
  });

  it("answers a generation to the conversations service, only in the generation's workspace", async () => {
    const ws = await workspaceWithKey();
    const other = await workspaceWithKey();
    const recorded = usage(ws, { model: 'service/balanced', routedModel: 'acme/balanced-1' });
    const { usageId } = await dataPlane.recordUsage(recorded);
    const conversations = meshClient(UsageService, mesh.urls.billing, 'billing', { caller: 'conversations' });
    expect(await conversations.getGeneration({ generationId: recorded.generationId, workspaceId: ws.workspaceId })).toMatchObject({
      generationId: recorded.generationId,
      usageId,
      workspaceId: ws.workspaceId,
      keyId: ws.keyId,
      model: 'service/balanced',
      routedModel: 'acme/balanced-1',
      tier: 'balanced',
    });
    // Another workspace's is told apart from an unknown id, so conversations can record the probe.
    for (const [request, code] of [
      [{ generationId: recorded.generationId, workspaceId: other.workspaceId }, Code.PermissionDenied],
      [{ generationId: 'gen_unknown', workspaceId: ws.workspaceId }, Code.NotFound],
    ] as const) {
      const err = await conversations.getGeneration(request).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code).toBe(code);
    }
    // Only the conversations service may ask.
    await expect(dataPlane.getGeneration({ generationId: recorded.generationId, workspaceId: ws.workspaceId })).rejects.toThrow(/not available/);
  });

  it('refuses bad usage with invalid_argument naming the field', async () => {
    const ws = await workspaceWithKey();
    const other = await workspaceWithKey();
    const refusals: Array<[Partial<Parameters<typeof dataPlane.recordUsage>[0]>, string]> = [
      [{ inputTokens: -1n }, 'input_tokens'],
      [{ outputTokens: -5n }, 'output_tokens'],
      [{ model: 'acme/x' }, 'upstream_cost_usd'],
      [{ byok: true }, 'upstream_cost_usd'],
      [{ model: 'acme/x', upstreamCostUsd: '-1' }, 'upstream_cost_usd'],
      [{ keyId: 'key_unknown' }, 'key_id'],
      [{ workspaceId: other.workspaceId }, 'workspace_id'],
      [{ generationId: '' }, 'generation_id'],
      [{ occurredAt: timestampFromDate(new Date(Date.now() + 3600_000)) }, 'occurred_at'],
    ];
    for (const [fields, field] of refusals) {
      const err = await dataPlane.recordUsage(usage(ws, fields)).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code, field).toBe(Code.InvalidArgument);
      expect(err?.findDetails(ErrorDetailSchema)[0]?.field).toBe(field);
    }
    expect((await call('GET', '/v1/billing/balance', { token: ws.token })).json.balance_usd).toBe('1.00');
  });
});

describe('top-ups through the sandbox', () => {
  it('creates one checkout for 20 identical concurrent requests and credits once for 20 concurrent completions', async () => {
    const ws = await workspaceWithKey();
    const body = { amount_usd: 12.5, idempotency_key: `topup-${Date.now()}` };
    const responses = await Promise.all(Array.from({ length: 20 }, () => call('POST', '/v1/billing/topup', { token: ws.token, body })));
    expect(responses.map((r) => r.status)).toEqual(Array(20).fill(201));
    expect(new Set(responses.map((r) => r.json.checkout_id)).size).toBe(1);
    const checkout = responses[0].json;
    expect(checkout).toMatchObject({ amount_usd: '12.5', status: 'pending', checkout_url: expect.stringContaining('/v1/billing/sandbox/checkout/') });
    expect(responses.every((r) => r.text === responses[0].text)).toBe(true);

    const completePath = `${new URL(checkout.checkout_url).pathname}/complete`;
    const completions = await Promise.all(Array.from({ length: 20 }, () => call('POST', completePath)));
    expect(completions.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(completions.every((r) => r.json.status === 'completed')).toBe(true);
    expect((await call('GET', '/v1/billing/balance', { token: ws.token })).json.balance_usd).toBe('13.50');
    const listed = await call('GET', '/v1/billing/topups', { token: ws.token });
    expect(listed.json.data).toEqual([{ ...checkout, status: 'completed', completed_at: expect.any(String) }]);
  });

  it('refuses bad amounts and keys, and a reused key with another amount', async () => {
    const ws = await workspaceWithKey();
    for (const amount of [0, -1, 'abc', 1.234, '1.234', '0', '', '1e3', null, 10_000.01]) {
      expectErrorBody(
        await call('POST', '/v1/billing/checkout', { token: ws.token, body: { amount_usd: amount, idempotency_key: 'k1' } }),
        400,
        undefined,
        'amount_usd',
      );
    }
    expectErrorBody(await call('POST', '/v1/billing/checkout', { token: ws.token, body: { amount_usd: '5' } }), 400, undefined, 'idempotency_key');
    expectErrorBody(
      await call('POST', '/v1/billing/checkout', { token: ws.token, body: { amount_usd: '5', idempotency_key: 'x'.repeat(256) } }),
      400,
      undefined,
      'idempotency_key',
    );
    expect((await call('POST', '/v1/billing/checkout', { token: ws.token, body: { amount_usd: '5.00', idempotency_key: 'x'.repeat(255) } })).status).toBe(201);
    expect((await call('POST', '/v1/billing/checkout', { token: ws.token, body: { amount_usd: 5, idempotency_key: 'x'.repeat(255) } })).status).toBe(201);
    expectErrorBody(
      await call('POST', '/v1/billing/checkout', { token: ws.token, body: { amount_usd: '6', idempotency_key: 'x'.repeat(255) } }),
      422,
      'idempotency_key_reused',
    );
    // Another workspace may use the same key for its own top-up.
    const other = await workspaceWithKey();
    expect((await call('POST', '/v1/billing/checkout', { token: other.token, body: { amount_usd: '6', idempotency_key: 'x'.repeat(255) } })).status).toBe(201);
  });
});
