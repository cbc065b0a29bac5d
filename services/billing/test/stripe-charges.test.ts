import { Code, ConnectError } from '@connectrpc/connect';
import { SandboxProvider } from '@switchboard/billing/providers/sandbox';
import { centsToUsd, readStripeSettings, StripeProvider } from '@switchboard/billing/providers/stripe';
import { type ChargeOutcomes, StripeWebhooks } from '@switchboard/billing/stripe-webhooks';
import type { Topups } from '@switchboard/billing/topups';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { createLogger } from '@switchboard/runtime/log';
import { FakeStripe } from '@switchboard/testkit/fake-stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The Stripe provider's saved-card calls against the local fake of Stripe's API (the real
 * `stripe` client): setup sessions, off-session charges keyed by the charge id (a retry after an
 * outage never charges twice), declines, detaching; and the webhook's dispatch of auto top-up
 * charge outcomes (docs/api/billing.md#payment-methods).
 */

const log = createLogger('billing-test', 'silent');
let fake: FakeStripe;
let stripe: StripeProvider;

beforeAll(async () => {
  fake = await FakeStripe.start();
  const settings = readStripeSettings('http://localhost:8080', fake.env());
  if (!settings) throw new Error('no Stripe settings');
  stripe = new StripeProvider(settings, log);
});

afterAll(async () => {
  await fake?.close();
});

function errorCodeOf(err: unknown): { code: Code; errorCode: string | undefined } {
  const connectError = ConnectError.from(err);
  return { code: connectError.code, errorCode: connectError.findDetails(ErrorDetailSchema)[0]?.code };
}

let setups = 0;
/** A card saved to a new customer, as the setup flow does it. */
async function savedCard(card: '4242' | '0341' = '4242') {
  setups += 1;
  const workspaceId = `ws_unit_${Date.now().toString(36)}${setups}`;
  const customerId = await stripe.createCustomer(workspaceId);
  const details = await stripe.startSetup({ id: `pms_unit${setups}`, workspaceId, expiresAt: new Date(Date.now() + 3_600_000), customerId });
  if (!details.providerSessionId) throw new Error('no session');
  fake.completeSession(details.providerSessionId, { card });
  const setupIntent = fake.sessions.get(details.providerSessionId)?.setup_intent;
  if (!setupIntent) throw new Error('no setup intent');
  const saved = await stripe.savedCard(setupIntent);
  return {
    workspaceId,
    customerId,
    saved,
    method: { id: `pm_unit${setups}`, providerMethodId: saved.providerMethodId, providerCustomerId: saved.providerCustomerId },
  };
}

describe('centsToUsd', () => {
  it('writes cents as an exact decimal string', () => {
    expect(centsToUsd(0)).toBe('0.00');
    expect(centsToUsd(7)).toBe('0.07');
    expect(centsToUsd(1234)).toBe('12.34');
    expect(centsToUsd(1_000_000)).toBe('10000.00');
  });
});

describe('StripeProvider saved cards', () => {
  it('reads the card a setup saved to the workspace customer', async () => {
    const { saved, customerId } = await savedCard('0341');
    expect(saved).toEqual({
      providerMethodId: expect.stringMatching(/^pm_test_/),
      providerCustomerId: customerId,
      brand: 'visa',
      last4: '0341',
      expMonth: 12,
      expYear: new Date().getUTCFullYear() + 3,
    });
  });

  it('charges off-session once per charge id, in exact cents, with the charge in the metadata', async () => {
    const { method, workspaceId } = await savedCard();
    const charge = { id: `atc_unit_${Date.now()}`, workspaceId, amountUsd: '25.10', method };
    const outcome = await stripe.chargeOffSession(charge);
    expect(outcome).toEqual({ status: 'succeeded', providerPaymentId: expect.stringMatching(/^pi_test_/) });
    const again = await stripe.chargeOffSession(charge);
    expect(again).toEqual(outcome);
    const intents = [...fake.paymentIntents.values()].filter((pi) => pi.metadata.auto_topup_charge_id === charge.id);
    expect(intents).toHaveLength(1);
    expect(intents[0]).toMatchObject({
      amount: 2510,
      payment_method: method.providerMethodId,
      customer: method.providerCustomerId,
      metadata: { workspace_id: workspaceId },
    });
    const requests = fake.requests.filter((r) => r.path === '/v1/payment_intents' && r.params.get('metadata[auto_topup_charge_id]') === charge.id);
    expect(requests.map((r) => [r.idempotencyKey, r.params.get('off_session'), r.params.get('confirm')])).toEqual([
      [charge.id, 'true', 'true'],
      [charge.id, 'true', 'true'],
    ]);
  });

  it('reports a declined card as failed with the decline code', async () => {
    const { method, workspaceId } = await savedCard('0341');
    const outcome = await stripe.chargeOffSession({ id: `atc_unit_decline_${Date.now()}`, workspaceId, amountUsd: '5', method });
    expect(outcome).toEqual({ status: 'failed', reason: 'card_declined', providerPaymentId: expect.stringMatching(/^pi_test_/) });
  });

  it('throws Unavailable when Stripe fails or does not answer, and the retry after it charges once', async () => {
    const { method, workspaceId } = await savedCard();
    const charge = { id: `atc_unit_outage_${Date.now()}`, workspaceId, amountUsd: '9.99', method };
    for (const mode of ['fail', 'hang', 'commit-then-hang'] as const) {
      fake.mode = mode;
      try {
        const err = await stripe.chargeOffSession(charge).catch((e: unknown) => e);
        expect(errorCodeOf(err), mode).toEqual({ code: Code.Unavailable, errorCode: 'payment_provider_unavailable' });
      } finally {
        fake.mode = 'ok';
      }
    }
    // Stripe did the charge in the last outage without answering: the retry finds it.
    const outcome = await stripe.chargeOffSession(charge);
    expect(outcome.status).toBe('succeeded');
    expect([...fake.paymentIntents.values()].filter((pi) => pi.metadata.auto_topup_charge_id === charge.id)).toHaveLength(1);
  });

  it('detaches a card; detaching it again is done too', async () => {
    const { method } = await savedCard();
    await stripe.detach(method);
    expect(fake.attached(method.providerMethodId)).toBe(false);
    await stripe.detach(method);
    fake.mode = 'fail';
    try {
      expect(errorCodeOf(await stripe.detach(method).catch((e: unknown) => e)).errorCode).toBe('payment_provider_unavailable');
    } finally {
      fake.mode = 'ok';
    }
  });
});

describe('SandboxProvider charges', () => {
  it('pays with test card 4242 and declines 0341', async () => {
    const sandbox = new SandboxProvider({ dataKeys: {} as never, publicUrl: 'http://localhost:8080' });
    const ref = (card: string) => ({ id: 'pm_x', providerMethodId: `sbx_card_${card}_pms_x`, providerCustomerId: null });
    expect(await sandbox.chargeOffSession({ id: 'atc_1', method: ref('4242') })).toEqual({ status: 'succeeded', providerPaymentId: 'sbx_pi_atc_1' });
    expect(await sandbox.chargeOffSession({ id: 'atc_2', method: ref('0341') })).toEqual({ status: 'failed', reason: 'card_declined' });
  });
});

describe('StripeWebhooks and auto top-up charges', () => {
  it('hands payment_intent outcomes of auto top-up charges to auto top-up, and ignores other payments', async () => {
    const calls: unknown[][] = [];
    const autoTopups: ChargeOutcomes = {
      chargeSucceeded: async (...args) => calls.push(['succeeded', ...args]),
      chargeFailed: async (...args) => calls.push(['failed', ...args]),
    };
    const webhooks = new StripeWebhooks({
      stripe,
      topups: {} as Topups,
      paymentMethods: {} as never,
      refunds: {} as never,
      autoTopups,
      log,
    });
    const good = await savedCard();
    const bad = await savedCard('0341');
    await stripe.chargeOffSession({ id: 'atc_hook_ok', workspaceId: good.workspaceId, amountUsd: '1', method: good.method });
    await stripe.chargeOffSession({ id: 'atc_hook_bad', workspaceId: bad.workspaceId, amountUsd: '1', method: bad.method });
    const intentOf = (chargeId: string) => [...fake.paymentIntents.values()].find((pi) => pi.metadata.auto_topup_charge_id === chargeId);
    const ok = intentOf('atc_hook_ok');
    const declined = intentOf('atc_hook_bad');
    if (!ok || !declined) throw new Error('no payment intents');

    for (const delivery of [fake.paymentIntentEvent(ok.id), fake.paymentIntentEvent(declined.id)]) {
      await webhooks.handle({ body: new TextEncoder().encode(delivery.body), signature: delivery.signature, requestId: 'req_hook' });
    }
    const other = fake.delivery('payment_intent.succeeded', { id: 'pi_test_other', object: 'payment_intent', metadata: {} });
    await webhooks.handle({ body: new TextEncoder().encode(other.body), signature: other.signature });
    expect(calls).toEqual([
      ['succeeded', 'atc_hook_ok', ok.id, 'req_hook'],
      ['failed', 'atc_hook_bad', 'card_declined', declined.id, 'req_hook'],
    ]);
  });
});
