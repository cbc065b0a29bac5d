import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { Money } from '@switchboard/runtime/money';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { deliver, FakeStripe } from '@switchboard/testkit/fake-stripe';
import { bootMesh, expectErrorBody, newUser, restClient } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The ledger and a month's statement through their real path (docs/api/billing.md#ledger,
 * docs/api/billing.md#statements), after a month of everything that moves a balance: top-ups
 * paid through Stripe Checkout on the local fake of Stripe's API, usage of every tier recorded as
 * the data plane records it, an auto top-up charged off-session, a partial refund (delivered
 * twice) and a lost dispute. The entries sum to the balance and the statement reconciles, exactly.
 */

let fake: FakeStripe;
let mesh: Mesh;
let call: ReturnType<typeof restClient>;
let dataPlane: ReturnType<typeof meshClient<typeof UsageService>>;

beforeAll(async () => {
  fake = await FakeStripe.start();
  mesh = await bootMesh({ ...fake.env(), SANDBOX_OPENING_CREDIT_USD: '0', AUTO_TOPUP_RETRY_INTERVAL: '1s' });
  call = restClient(mesh.gatewayUrl);
  dataPlane = meshClient(UsageService, mesh.urls.billing, 'billing', { caller: 'data-plane' });
});

afterAll(async () => {
  await mesh?.stop();
  await fake?.close();
});

const thisMonth = () => new Date().toISOString().slice(0, 7);
const sum = (amounts: string[]) => amounts.reduce((total, amount) => total.plus(amount), new Money(0));
/** Decimal strings compare as amounts: "42.50" is 42.5. */
const expectUsd = (actual: string, expected: string) => expect(new Money(actual).eq(expected), `${actual} = ${expected}`).toBe(true);

describe('the ledger and the statement', () => {
  it('reconcile exactly after top-ups, usage, an auto top-up, a refund and a lost dispute', async () => {
    const registered = await call('POST', '/v1/auth/register', { body: newUser() });
    expect(registered.status, registered.text).toBe(201);
    const token: string = registered.json.session.access_token;
    const workspaceId: string = registered.json.user.personal_workspace_id;
    const key = await call('POST', '/v1/keys', { token, body: { name: 'statement' } });
    const keyId: string = key.json.key.key_id;
    const balance = async () => (await call('GET', '/v1/billing/balance', { token })).json.balance_usd as string;
    expect(await balance()).toBe('0');

    // Two top-ups paid on Stripe Checkout.
    const paid: string[] = [];
    for (const [index, amount] of ['30.00', '12.50'].entries()) {
      const started = await call('POST', '/v1/billing/checkout', { token, body: { amount_usd: amount, idempotency_key: `statement-${index}` } });
      expect(started.status, started.text).toBe(201);
      const sessionId = new URL(started.json.checkout_url).pathname.split('/').pop()!;
      const delivery = fake.completeSession(sessionId);
      expect((await deliver(mesh.gatewayUrl, delivery)).status).toBe(204);
      paid.push(fake.sessions.get(sessionId)!.payment_intent!);
    }
    expectUsd(await balance(), '42.5');

    // Usage of three tiers, unrounded: 0.0003 (fast), 0.0015 (balanced), 2.1 (passthrough).
    let generation = 0;
    const use = (model: string, upstreamCostUsd?: string) =>
      dataPlane.recordUsage({
        generationId: `gen_stmt_${Date.now().toString(36)}_${++generation}`,
        keyId,
        workspaceId,
        model,
        inputTokens: 1000n,
        outputTokens: 500n,
        upstreamCostUsd,
      });
    await use('service/fast');
    await use('service/balanced');
    await use('acme/large', '2.00');

    // A card, and auto top-up saved with its threshold above the balance: charged at once, 25.00.
    const setup = await call('POST', '/v1/billing/payment-methods/setup', { token, body: {} });
    expect(setup.status, setup.text).toBe(201);
    const setupSession = new URL(setup.json.setup_url).pathname.split('/').pop()!;
    expect((await deliver(mesh.gatewayUrl, fake.completeSession(setupSession))).status).toBe(204);
    const saved = await call('PUT', '/v1/billing/auto-topup', {
      token,
      body: { enabled: true, threshold_usd: '45.00', amount_usd: '25.00', monthly_limit_usd: '100.00' },
    });
    expect(saved.status, saved.text).toBe(200);
    await eventually(async () => new Money(await balance()).eq('65.3982'), 'the auto top-up credited', 20_000);

    // 5.00 of the first top-up refunded (the event delivered twice), the second one's dispute lost:
    // 47.8982 stays above the threshold, so no second charge.
    const refund = fake.refund(paid[0], 500);
    expect((await deliver(mesh.gatewayUrl, refund)).status).toBe(204);
    expect((await deliver(mesh.gatewayUrl, refund)).status).toBe(204);
    expect((await deliver(mesh.gatewayUrl, fake.loseDispute(paid[1]))).status).toBe(204);
    expectUsd(await balance(), '47.8982');

    // Every change is an entry; the entries sum to the balance.
    const ledger = await call('GET', '/v1/billing/ledger?limit=100', { token });
    expect(ledger.status, ledger.text).toBe(200);
    const entries: Array<{ type: string; amount_usd: string; balance_after_usd: string }> = ledger.json.data;
    expect(entries.map((entry) => entry.type).sort()).toEqual(['auto_topup', 'dispute', 'refund', 'topup', 'topup', 'usage', 'usage', 'usage']);
    expect(sum(entries.map((entry) => entry.amount_usd)).toFixed(), JSON.stringify(entries)).toBe(new Money(await balance()).toFixed());
    expectUsd(entries[0].balance_after_usd, '47.8982');

    const statement = await call('GET', `/v1/billing/statements/${thisMonth()}`, { token });
    expect(statement.status, statement.text).toBe(200);
    expect(statement.json).toMatchObject({ month: thisMonth(), currency: 'USD', opening_balance_usd: '0' });
    const expected = { credits_usd: '67.5', usage_usd: '2.1018', refunds_usd: '17.5', closing_balance_usd: '47.8982' };
    for (const [field, amount] of Object.entries(expected)) expectUsd(statement.json[field], amount);
    const byTier = { fast: '0.0003', balanced: '0.0015', passthrough: '2.1', byok: '0' };
    for (const [tier, amount] of Object.entries(byTier)) expectUsd(statement.json.usage_by_tier_usd[tier], amount);
    const { opening_balance_usd, credits_usd, usage_usd, refunds_usd, closing_balance_usd } = statement.json;
    expect(new Money(opening_balance_usd).plus(credits_usd).minus(usage_usd).minus(refunds_usd).eq(closing_balance_usd)).toBe(true);

    // A month not yet begun, or not a month: 400 on `month`.
    expectErrorBody(await call('GET', '/v1/billing/statements/2999-01', { token }), 400, 'invalid_request', 'month');
    expectErrorBody(await call('GET', '/v1/billing/statements/2026-13', { token }), 400, 'invalid_request', 'month');
  });
});
