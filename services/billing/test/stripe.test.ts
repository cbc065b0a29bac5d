import { Code, ConnectError } from '@connectrpc/connect';
import { readStripeSettings, StripeProvider, usdToCents } from '@switchboard/billing/providers/stripe';
import { StripeWebhooks } from '@switchboard/billing/stripe-webhooks';
import type { Topups } from '@switchboard/billing/topups';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { ConfigError } from '@switchboard/runtime/config';
import { createLogger } from '@switchboard/runtime/log';
import Stripe from 'stripe';
import { describe, expect, it } from 'vitest';

/**
 * The Stripe provider's pure parts: its configuration, the cents conversion, and the webhook's
 * answers that need no database (the REST path is e2e/billing/stripe-webhook.test.ts).
 */

const log = createLogger('billing-test', 'silent');
const secret = 'whsec_unit_test';
const settings = readStripeSettings('http://localhost:8080', { STRIPE_SECRET_KEY: 'sk_test_unit', STRIPE_WEBHOOK_SECRET: secret })!;

function errorCodeOf(err: unknown): { code: Code; errorCode: string | undefined } {
  const connectError = ConnectError.from(err);
  return { code: connectError.code, errorCode: connectError.findDetails(ErrorDetailSchema)[0]?.code };
}

/** A Topups that records what the webhook asked of it. */
function topupsSpy(known = true) {
  const calls: Array<Parameters<Topups['completeByProvider']>[0]> = [];
  const topups = {
    completeByProvider: async (input: (typeof calls)[number]) => {
      calls.push(input);
      return known;
    },
  } as unknown as Topups;
  return { topups, calls };
}

describe('usdToCents', () => {
  it('converts amounts of at most 2 decimals exactly', () => {
    expect(usdToCents('0.29')).toBe(29);
    expect(usdToCents('0.07')).toBe(7);
    expect(usdToCents('1.1')).toBe(110);
    expect(usdToCents('12.34')).toBe(1234);
    expect(usdToCents('5')).toBe(500);
    expect(usdToCents('0010.00')).toBe(1000);
    expect(usdToCents('999999999999.99')).toBe(99999999999999);
    for (const bad of ['', '1.234', '-1', '1e3', '.5', '5.', ' 5']) expect(() => usdToCents(bad), bad).toThrow();
  });
});

describe('readStripeSettings', () => {
  it('is off without STRIPE_SECRET_KEY, and needs STRIPE_WEBHOOK_SECRET with it', () => {
    expect(readStripeSettings('http://x', {})).toBeUndefined();
    expect(() => readStripeSettings('http://x', { STRIPE_SECRET_KEY: 'sk_test_1' })).toThrow(ConfigError);
    expect(() => readStripeSettings('http://x', { STRIPE_SECRET_KEY: 'sk_test_1' })).toThrow(/STRIPE_WEBHOOK_SECRET is required/);
    expect(() => readStripeSettings('http://x', { STRIPE_SECRET_KEY: 'sk_test_1', STRIPE_WEBHOOK_SECRET: 'w', STRIPE_API_BASE: 'localhost:1' })).toThrow(
      /STRIPE_API_BASE/,
    );
    const production = { STRIPE_SECRET_KEY: 'sk_live_1', STRIPE_WEBHOOK_SECRET: 'w', NODE_ENV: 'production' };
    expect(() => readStripeSettings('http://x', { ...production, STRIPE_API_BASE: 'http://stripe.internal:12111' })).toThrow(
      /https URL with NODE_ENV=production/,
    );
    expect(readStripeSettings('http://x', { ...production, STRIPE_API_BASE: 'https://stripe.internal' })?.apiBase).toBe('https://stripe.internal');
    expect(() => readStripeSettings('http://x', { STRIPE_SECRET_KEY: 'sk_test_1', STRIPE_WEBHOOK_SECRET: 'w', STRIPE_SUCCESS_URL: '/done' })).toThrow(
      /STRIPE_SUCCESS_URL/,
    );
  });

  it('has defaults from PUBLIC_BASE_URL and the documented timeouts', () => {
    expect(settings).toEqual({
      secretKey: 'sk_test_unit',
      webhookSecret: secret,
      successUrl: 'http://localhost:8080/app/billing',
      cancelUrl: 'http://localhost:8080/app/billing',
      timeoutMs: 4000,
      toleranceSeconds: 300,
      apiBase: undefined,
    });
  });
});

/** What these sessions never reach (no payment intent, no setup, no refund). */
const unusedDeps = { paymentMethods: {} as never, refunds: {} as never, autoTopups: {} as never };

describe('StripeWebhooks', () => {
  it('answers 404 provider_not_configured when Stripe is not configured', async () => {
    const { topups, calls } = topupsSpy();
    const webhooks = new StripeWebhooks({ topups, log, ...unusedDeps });
    const err = await webhooks.handle({ body: new TextEncoder().encode('{}'), signature: 't=1,v1=00' }).catch((e: unknown) => e);
    expect(errorCodeOf(err)).toEqual({ code: Code.NotFound, errorCode: 'provider_not_configured' });
    expect(calls).toEqual([]);
  });

  it('completes paid sessions by event id and session id, and refuses bad signatures', async () => {
    const { topups, calls } = topupsSpy(false);
    const webhooks = new StripeWebhooks({ stripe: new StripeProvider(settings, log), topups, log, ...unusedDeps });
    const payload = JSON.stringify({
      id: 'evt_1',
      object: 'event',
      type: 'checkout.session.completed',
      data: { object: { id: 'cs_1', object: 'checkout.session', payment_status: 'paid' } },
    });
    const body = new TextEncoder().encode(payload);
    await webhooks.handle({ body, signature: Stripe.webhooks.generateTestHeaderString({ payload, secret }), requestId: 'req_1' });
    expect(calls).toEqual([{ provider: 'stripe', eventId: 'evt_1', sessionId: 'cs_1', requestId: 'req_1' }]);

    for (const signature of ['', 'nonsense', Stripe.webhooks.generateTestHeaderString({ payload, secret: 'whsec_other' })]) {
      const err = await webhooks.handle({ body, signature }).catch((e: unknown) => e);
      expect(errorCodeOf(err), signature).toEqual({ code: Code.InvalidArgument, errorCode: 'invalid_signature' });
    }
    const empty = await webhooks.handle({ signature: Stripe.webhooks.generateTestHeaderString({ payload, secret }) }).catch((e: unknown) => e);
    expect(errorCodeOf(empty).errorCode).toBe('invalid_signature');
    expect(calls).toHaveLength(1);
  });
});
