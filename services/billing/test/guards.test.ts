import { Code } from '@connectrpc/connect';
import { readBillingConfig } from '@switchboard/billing/config';
import { prepareBilling } from '@switchboard/billing/prepare';
import { registerRoutes } from '@switchboard/billing/server';
import { beforeTheLedger } from '@switchboard/billing/store/ledger';
import { BillingService, CheckoutService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { ConfigError } from '@switchboard/runtime/config';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService, refusalOf } from '@switchboard/runtime/in-process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The payment provider guard and the free credit (docs/api/billing.md#free-credit-and-the-sandbox):
 * which provider each environment chooses, the refusals of a production start, and, through the
 * handlers built as main.ts builds them, the 503 without a provider and the free credit granted
 * once per user however many grants race.
 */

const stripe = { STRIPE_SECRET_KEY: 'sk_test_guard', STRIPE_WEBHOOK_SECRET: 'whsec_guard' };

describe('readBillingConfig: the payment provider', () => {
  it('runs the sandbox only with BILLING_SANDBOX=true, and never when Stripe is configured', () => {
    expect(readBillingConfig({}).sandbox).toBe(false);
    expect(readBillingConfig({}).stripe).toBeUndefined();
    expect(readBillingConfig({ BILLING_SANDBOX: 'true' }).sandbox).toBe(true);
    expect(readBillingConfig({ BILLING_SANDBOX: 'false' }).sandbox).toBe(false);
    expect(readBillingConfig({ BILLING_SANDBOX: 'true', ...stripe })).toMatchObject({ sandbox: false, stripe: { secretKey: 'sk_test_guard' } });
    expect(() => readBillingConfig({ BILLING_SANDBOX: 'yes' })).toThrow(/^BILLING_SANDBOX must be true or false/);
  });

  it('refuses a production start without Stripe and without BILLING_SANDBOX=true, naming both', () => {
    for (const env of [{ NODE_ENV: 'production' }, { NODE_ENV: 'production', BILLING_SANDBOX: 'false' }]) {
      expect(() => readBillingConfig(env)).toThrow(ConfigError);
      expect(() => readBillingConfig(env)).toThrow(/STRIPE_SECRET_KEY.*BILLING_SANDBOX=true/);
    }
    expect(readBillingConfig({ NODE_ENV: 'production', ...stripe }).stripe).toBeDefined();
    expect(readBillingConfig({ NODE_ENV: 'production', BILLING_SANDBOX: 'true' }).sandbox).toBe(true);
  });

  it('opens accounts with SANDBOX_OPENING_CREDIT_USD only with the sandbox on, and never in production', () => {
    expect(readBillingConfig({})).toMatchObject({ openingCreditUsd: '0', openingCreditIgnored: false, freeCreditUsd: '1.00' });
    expect(readBillingConfig({ BILLING_SANDBOX: 'true' }).openingCreditUsd).toBe('0');
    expect(readBillingConfig({ BILLING_SANDBOX: 'true', SANDBOX_OPENING_CREDIT_USD: '2.50' }).openingCreditUsd).toBe('2.50');
    // With Stripe the sandbox's pages are gone, the tests' funded accounts stay (BILLING_SANDBOX=true is the test's word).
    expect(readBillingConfig({ BILLING_SANDBOX: 'true', SANDBOX_OPENING_CREDIT_USD: '2.50', ...stripe }).openingCreditUsd).toBe('2.50');
    expect(readBillingConfig({ SANDBOX_OPENING_CREDIT_USD: '2.50' })).toMatchObject({ openingCreditUsd: '0', openingCreditIgnored: true });
    expect(() => readBillingConfig({ BILLING_SANDBOX: 'true', SANDBOX_OPENING_CREDIT_USD: '-1' })).toThrow(/SANDBOX_OPENING_CREDIT_USD/);
    expect(() => readBillingConfig({ NODE_ENV: 'production', BILLING_SANDBOX: 'true', SANDBOX_OPENING_CREDIT_USD: '1.00' })).toThrow(ConfigError);
    expect(() => readBillingConfig({ NODE_ENV: 'production', BILLING_SANDBOX: 'true', SANDBOX_OPENING_CREDIT_USD: '1.00' })).toThrow(
      /^SANDBOX_OPENING_CREDIT_USD is refused with NODE_ENV=production/,
    );
    expect(readBillingConfig({ NODE_ENV: 'production', ...stripe, SANDBOX_OPENING_CREDIT_USD: '0' }).openingCreditUsd).toBe('0');
  });
});

describe('the billing handlers without a payment provider', () => {
  let service: InProcessService;
  let clientAs: ReturnType<InProcessService['serve']>;
  let handlers: ReturnType<typeof prepareBilling>;
  const workspaceId = newId('org');
  const owner = { caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role: 'owner' };

  beforeAll(async () => {
    service = await inProcessService('billing', new URL('../dist/migrations/', import.meta.url));
    handlers = prepareBilling(service.runtime, readBillingConfig({}));
    clientAs = service.serve((router) => registerRoutes(router, handlers));
  });

  afterAll(() => service?.stop());

  it('answer a top-up 503 payment_provider_unavailable naming the settings, and sandbox pages 404', async () => {
    const billing = clientAs(BillingService, owner);
    const refused = billing.createTopup({ amountUsd: { kind: { case: 'stringValue', value: '5' } }, idempotencyKey: 'guard-1' });
    expect(await refusalOf(refused)).toMatchObject({ code: Code.Unavailable, error: 'payment_provider_unavailable' });
    await expect(refused).rejects.toThrow(/STRIPE_SECRET_KEY.*BILLING_SANDBOX=true/);
    // Input errors still name their field first.
    expect(await refusalOf(billing.createTopup({ amountUsd: { kind: { case: 'stringValue', value: '0' } }, idempotencyKey: 'k' }))).toMatchObject({
      field: 'amount_usd',
    });
    const checkout = clientAs(CheckoutService, { caller: 'gateway' });
    expect(await refusalOf(checkout.completeSandboxCheckout({ token: 'a'.repeat(43) }))).toMatchObject({ code: Code.NotFound, error: 'checkout_not_found' });
    expect(await refusalOf(checkout.getSandboxCheckout({ token: 'a'.repeat(43) }))).toMatchObject({ code: Code.NotFound, error: 'checkout_not_found' });
    // New accounts open at 0 here (no sandbox, no opening credit).
    expect((await billing.getBalance({})).balanceUsd).toBe('0');
  });

  it('grant the free credit once per user, to the workspace named, however many grants race', async () => {
    const userId = newId('usr');
    const personal = newId('org');
    const { db } = service.runtime;
    const grants = await Promise.all(
      Array.from({ length: 8 }, () => db.transaction((trx) => handlers.freeCredits.grant(trx, { userId, workspaceId: personal }))),
    );
    expect(grants.filter(Boolean)).toHaveLength(1);
    const balance = await clientAs(BillingService, { ...owner, workspaceId: personal }).getBalance({});
    expect(balance.balanceUsd).toBe('1.00');
    // Once per user: the same user naming another workspace gets nothing more.
    expect(await db.transaction((trx) => handlers.freeCredits.grant(trx, { userId, workspaceId: newId('org') }))).toBe(false);
    const events = await db('outbox').whereRaw("payload->>'type' = 'billing.free_credit.granted' AND payload->'data'->>'user_id' = ?", [userId]);
    expect(events).toHaveLength(1);
  });

  it('grant nothing to an account opened before the ledger: it had its free credit when it opened', async () => {
    const { db } = service.runtime;
    const workspaceId = newId('org');
    // As migration 006 opened the ledger of an account of the time: its balance, the credit included.
    await db('accounts').insert({ workspace_id: workspaceId, balance_usd: '1.00' });
    await db('ledger_entries').insert({
      id: newId('led'),
      workspace_id: workspaceId,
      type: 'adjustment',
      amount_usd: '1.00',
      balance_after_usd: '1.00',
      reference: beforeTheLedger,
    });
    expect(await db.transaction((trx) => handlers.freeCredits.grant(trx, { userId: newId('usr'), workspaceId }))).toBe(false);
    expect((await clientAs(BillingService, { ...owner, workspaceId }).getBalance({})).balanceUsd).toBe('1.00');
  });
});

describe('the billing handlers with Stripe', () => {
  let service: InProcessService;
  let clientAs: ReturnType<InProcessService['serve']>;
  const workspaceId = newId('org');
  const owner = { caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role: 'owner' };

  beforeAll(async () => {
    service = await inProcessService('billing', new URL('../dist/migrations/', import.meta.url));
    // Nothing reaches Stripe: the amounts are refused first.
    const handlers = prepareBilling(service.runtime, readBillingConfig({ ...stripe, STRIPE_API_BASE: 'http://127.0.0.1:9' }));
    clientAs = service.serve((router) => registerRoutes(router, handlers));
  });

  afterAll(() => service?.stop());

  it("refuse top-ups and auto top-ups below Stripe's smallest charge (0.50 USD), on the field", async () => {
    const billing = clientAs(BillingService, owner);
    const small = { kind: { case: 'stringValue' as const, value: '0.49' } };
    expect(await refusalOf(billing.createTopup({ amountUsd: small, idempotencyKey: 'small-1' }))).toMatchObject({
      code: Code.InvalidArgument,
      field: 'amount_usd',
    });
    const settings = { thresholdUsd: small, amountUsd: small, monthlyLimitUsd: { kind: { case: 'stringValue' as const, value: '10' } } };
    expect(await refusalOf(billing.updateAutoTopup(settings))).toMatchObject({ code: Code.InvalidArgument, field: 'amount_usd' });
  });
});
