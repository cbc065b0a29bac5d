import { create } from '@bufbuild/protobuf';
import { timestampFromDate, type Value } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import { Accounts } from '@switchboard/billing/accounts';
import { AutoTopups, type AutoTopupsDeps } from '@switchboard/billing/auto-topups';
import { readBillingConfig } from '@switchboard/billing/config';
import type { KeyDirectory } from '@switchboard/billing/key-directory';
import { Ledger } from '@switchboard/billing/ledger';
import { prepareBilling } from '@switchboard/billing/prepare';
import type { ChargeOutcome, SavedMethodRef } from '@switchboard/billing/providers/provider';
import { registerRoutes } from '@switchboard/billing/server';
import { listCharges } from '@switchboard/billing/store/auto-topups';
import { UsageLedger } from '@switchboard/billing/usage';
import { UsageSettlement } from '@switchboard/billing/usage-settlement';
import { BillingService, type UsageRecord, UsageRecordSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { retryLater } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService, refusalOf } from '@switchboard/runtime/in-process';
import { defaultPricingPath, Pricing } from '@switchboard/runtime/pricing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

/**
 * Auto top-up on its own, on a schema of its own on the test Postgres: the settings' checks, the
 * crossings that debits (usage settled a batch at a time, as billing's work consumer does) make,
 * one charge however many debits cross at once, the monthly limit, failures that switch it off,
 * and charges credited exactly once whatever answers first. The provider, the saved method and the
 * ledger are stand-ins given through the deps; the clock is injected.
 */

let service: InProcessService;
let accounts: Accounts;
const pricing = Pricing.load(defaultPricingPath);
let now = new Date('2026-11-10T12:00:00Z');

/** What the stand-in provider was asked, and how it answers. */
class FakeProvider {
  calls: Array<{ id: string; workspaceId: string; amountUsd: string; method: SavedMethodRef }> = [];
  answer: (id: string, workspaceId: string) => Promise<ChargeOutcome> = async (id) => ({ status: 'succeeded', providerPaymentId: `pi_${id}` });
  charge = async (charge: { id: string; workspaceId: string; amountUsd: string; method: SavedMethodRef }): Promise<ChargeOutcome> => {
    this.calls.push(charge);
    return this.answer(charge.id, charge.workspaceId);
  };
}

let provider: FakeProvider;
/** The charges of one workspace the provider was asked for (a drain attempts every workspace's pending charges). */
const callsOf = (workspaceId: string) => provider.calls.filter((call) => call.workspaceId === workspaceId);
/** Workspaces with a saved method. */
const methods = new Map<string, SavedMethodRef>();
const payments: Array<{ providerPaymentId: string; workspaceId: string; topupId: string; amountUsd: string }> = [];

function deps(overrides: Partial<AutoTopupsDeps> = {}): AutoTopupsDeps {
  const { db, log, recordEvent, audit } = service.runtime;
  return {
    db,
    log,
    accounts,
    recordEvent,
    audit,
    post: (trx, entry) => ledger.post(trx, entry),
    defaultMethod: async (_db, workspaceId) => methods.get(workspaceId),
    charge: (charge) => provider.charge(charge),
    recordProviderPayment: async (_trx, payment) => {
      payments.push(payment);
    },
    providerName: 'stripe',
    maxAmountUsd: '10000',
    chargeTimeoutMs: 500,
    retryIntervalMs: 1,
    clock: () => now,
    ...overrides,
  };
}

let autoTopups: AutoTopups;
let settlement: UsageSettlement;
let ledger: Ledger;

beforeAll(async () => {
  service = await inProcessService('billing', new URL('../dist/migrations/', import.meta.url));
  accounts = new Accounts({ db: service.runtime.db, pricing, openingCreditUsd: '1.00' });
});

afterAll(() => service?.stop());

beforeEach(() => {
  provider = new FakeProvider();
  ledger = new Ledger({ recordEvent: service.runtime.recordEvent });
  autoTopups = new AutoTopups(deps());
  ledger.watch(autoTopups);
  settlement = new UsageSettlement({ pricing, accounts, ledger, log: service.runtime.log, recordEvents: service.runtime.recordEvents });
  now = new Date('2026-11-10T12:00:00Z');
});

const amount = (value: string): Value => ({ kind: { case: 'stringValue', value } }) as Value;
const number = (value: number): Value => ({ kind: { case: 'numberValue', value } }) as Value;
const nullValue = (): Value => ({ kind: { case: 'nullValue', value: 0 } }) as Value;

function record(workspaceId: string, costUsd: string): UsageRecord {
  return create(UsageRecordSchema, {
    generationId: newId('gen'),
    keyId: 'key_auto',
    workspaceId,
    model: 'service/fast',
    inputTokens: 1000n,
    outputTokens: 500n,
    occurredAt: timestampFromDate(new Date()),
    costUsd,
    tier: 'fast',
    planId: 'payg',
    pricingVersion: pricing.version,
  });
}

/** Usage of `costUsd` settled as the work consumer settles it: a transaction of its own. */
const debit = (workspaceId: string, costUsd: string) => service.runtime.db.transaction((trx) => settlement.settle([record(workspaceId, costUsd)], trx));

const credit = (workspaceId: string, amountUsd: string) =>
  service.runtime.db.transaction((trx) => ledger.post(trx, { workspaceId, type: 'adjustment', amountUsd, reference: 'test credit' }));

async function balance(workspaceId: string): Promise<string> {
  return (await accounts.get(workspaceId)).balanceUsd;
}

async function events(type: string, workspaceId: string): Promise<Array<Record<string, unknown>>> {
  const rows: Array<{ payload: { data: Record<string, unknown> } }> = await service.runtime
    .db('outbox')
    .where('subject', 'like', `%.${type}`)
    .whereRaw("payload->>'workspace_id' = ?", [workspaceId])
    .orderBy('id')
    .select('payload');
  return rows.map((row) => row.payload.data);
}

/** A workspace (balance 1.00) with a saved method and auto top-up on: below 0.50, charge 10.00, at most 25.00 a month. */
async function enabledWorkspace(settings: { threshold?: string; amount?: string; limit?: string; low?: string } = {}): Promise<string> {
  const workspaceId = newId('org');
  methods.set(workspaceId, { id: newId('pm'), providerMethodId: `pm_card_${workspaceId}`, providerCustomerId: `cus_${workspaceId}` });
  await autoTopups.update(
    { workspaceId, userId: 'usr_owner' },
    {
      enabled: true,
      thresholdUsd: amount(settings.threshold ?? '0.50'),
      amountUsd: amount(settings.amount ?? '10.00'),
      monthlyLimitUsd: amount(settings.limit ?? '25.00'),
      lowBalanceThresholdUsd: settings.low ? amount(settings.low) : undefined,
    },
  );
  return workspaceId;
}

describe('auto top-up settings', () => {
  it('read as off with nothing set until saved', async () => {
    const workspaceId = newId('org');
    expect(await autoTopups.get(workspaceId)).toEqual({
      enabled: false,
      thresholdUsd: undefined,
      amountUsd: undefined,
      monthlyLimitUsd: undefined,
      lowBalanceThresholdUsd: undefined,
      paymentMethodId: undefined,
      chargedThisMonthUsd: '0.00',
      consecutiveFailures: 0,
      disabledReason: undefined,
      updatedAt: undefined,
    });
  });

  it('name the field of each invalid amount, and of a monthly limit below the amount', async () => {
    const caller = { workspaceId: newId('org'), userId: 'usr_owner' };
    const refused = async (input: Parameters<AutoTopups['update']>[1]) => refusalOf(autoTopups.update(caller, input));
    for (const field of ['thresholdUsd', 'amountUsd', 'monthlyLimitUsd', 'lowBalanceThresholdUsd'] as const) {
      const wire = field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
      for (const bad of [
        amount('0'),
        amount('-1'),
        amount('1.234'),
        amount('10000.01'),
        amount('1e3'),
        amount(' 5'),
        number(0),
        number(Number.NaN),
        number(1.005),
      ]) {
        expect(await refused({ [field]: bad }), `${wire} ${JSON.stringify(bad.kind)}`).toEqual({
          code: Code.InvalidArgument,
          error: 'invalid_request',
          field: wire,
        });
      }
      expect(await refused({ [field]: { kind: { case: 'boolValue', value: true } } as Value })).toMatchObject({ field: wire });
    }
    expect(await refused({ amountUsd: amount('20'), monthlyLimitUsd: amount('19.99') })).toMatchObject({
      code: Code.InvalidArgument,
      field: 'monthly_limit_usd',
    });
    expect(await refused({ enabled: true, amountUsd: amount('20'), monthlyLimitUsd: amount('20') })).toMatchObject({ field: 'threshold_usd' });
    // Numbers and decimal strings both, at most the largest top-up.
    expect(
      await autoTopups.update(caller, {
        thresholdUsd: number(5),
        amountUsd: number(20.5),
        monthlyLimitUsd: amount('10000'),
        lowBalanceThresholdUsd: amount('7.25'),
      }),
    ).toMatchObject({ enabled: false, thresholdUsd: '5', amountUsd: '20.5', monthlyLimitUsd: '10000', lowBalanceThresholdUsd: '7.25' });
  });

  it('cannot be enabled without a saved payment method (422 payment_method_required)', async () => {
    const workspaceId = newId('org');
    const input = { enabled: true, thresholdUsd: amount('5'), amountUsd: amount('20'), monthlyLimitUsd: amount('100') };
    const refusal = autoTopups.update({ workspaceId, userId: 'usr_owner' }, input);
    expect(await refusalOf(refusal)).toEqual({ code: Code.FailedPrecondition, error: 'payment_method_required', field: 'enabled' });
    expect((await autoTopups.get(workspaceId)).updatedAt).toBeUndefined();
    methods.set(workspaceId, { id: 'pm_saved', providerMethodId: 'pm_card_visa', providerCustomerId: 'cus_1' });
    const saved = await autoTopups.update({ workspaceId, userId: 'usr_owner' }, input);
    expect(saved).toMatchObject({ enabled: true, thresholdUsd: '5', amountUsd: '20', monthlyLimitUsd: '100', paymentMethodId: 'pm_saved' });
    expect(saved.updatedAt).toBeDefined();
  });

  it('keep a field left out, clear one sent as null, and report each change (billing.auto_topup.updated)', async () => {
    const workspaceId = await enabledWorkspace({ low: '2.00' });
    const caller = { workspaceId, userId: 'usr_admin' };
    expect(await autoTopups.update(caller, { amountUsd: amount('12') })).toMatchObject({
      enabled: true,
      thresholdUsd: '0.50',
      amountUsd: '12',
      monthlyLimitUsd: '25.00',
      lowBalanceThresholdUsd: '2.00',
    });
    expect((await autoTopups.update(caller, { lowBalanceThresholdUsd: nullValue() })).lowBalanceThresholdUsd).toBeUndefined();
    // The same settings again change nothing: no event.
    await autoTopups.update(caller, { amountUsd: amount('12') });
    expect(await autoTopups.update(caller, { enabled: false })).toMatchObject({ enabled: false, amountUsd: '12' });
    const updated = await events('billing.auto_topup.updated', workspaceId);
    expect(updated.map((e) => [e.enabled, e.amount_usd, e.low_balance_threshold_usd ?? null, e.reason, e.updated_by])).toEqual([
      [true, '10.00', '2.00', 'settings', 'usr_owner'],
      [true, '12', '2.00', 'settings', 'usr_admin'],
      [true, '12', null, 'settings', 'usr_admin'],
      [false, '12', null, 'settings', 'usr_admin'],
    ]);
  });

  it('switch off when the last payment method is removed', async () => {
    const workspaceId = await enabledWorkspace();
    await service.runtime.db.transaction((trx) => autoTopups.paymentMethodsGone(trx, workspaceId, 'usr_owner'));
    methods.delete(workspaceId);
    expect(await autoTopups.get(workspaceId)).toMatchObject({ enabled: false, disabledReason: 'payment_method_removed', paymentMethodId: undefined });
    expect((await events('billing.auto_topup.updated', workspaceId)).at(-1)).toMatchObject({ enabled: false, reason: 'payment_method_removed' });
    expect((await events('billing.auto_topup.updated', workspaceId)).at(-1)?.updated_by ?? null).toBeNull();
  });
});

describe('auto top-up charges', () => {
  it('start once when a debit crosses the threshold, and credit the balance once (trigger auto)', async () => {
    const workspaceId = await enabledWorkspace();
    await debit(workspaceId, '0.25'); // 0.75: above the threshold
    expect(await listCharges(service.runtime.db, workspaceId)).toEqual([]);
    await debit(workspaceId, '0.30'); // 0.45: crossed
    await debit(workspaceId, '0.05'); // 0.40: still below, no new crossing
    const [pending, ...others] = await listCharges(service.runtime.db, workspaceId);
    expect(others).toEqual([]);
    expect(pending).toMatchObject({ status: 'pending', amount_usd: '10.00', month: '2026-11-01', provider: 'stripe' });
    expect(pending.id).toMatch(/^atp_/);
    expect((await autoTopups.get(workspaceId)).chargedThisMonthUsd).toBe('10.00');

    await autoTopups.drain();
    expect(callsOf(workspaceId)).toEqual([{ id: pending.id, workspaceId, amountUsd: '10.00', method: methods.get(workspaceId) }]);
    expect(await balance(workspaceId)).toBe('10.40');
    const [charged] = await listCharges(service.runtime.db, workspaceId);
    expect(charged).toMatchObject({ status: 'succeeded', provider_payment_id: `pi_${pending.id}`, payment_method_id: methods.get(workspaceId)?.id });
    expect(payments.filter((p) => p.workspaceId === workspaceId)).toEqual([
      { providerPaymentId: `pi_${pending.id}`, workspaceId, topupId: pending.id, amountUsd: '10.00' },
    ]);
    expect(await events('billing.topup.completed', workspaceId)).toEqual([
      expect.objectContaining({ checkout_id: pending.id, amount_usd: '10.00', balance_usd: '10.40', provider: 'stripe', trigger: 'auto' }),
    ]);
    // The provider's event after the worker's answer (or twice): credited once.
    expect(await autoTopups.chargeSucceeded(pending.id, `pi_${pending.id}`)).toBe(true);
    expect(await autoTopups.chargeSucceeded(pending.id, `pi_${pending.id}`)).toBe(true);
    expect(await autoTopups.chargeFailed(pending.id, 'card_declined')).toBe(true);
    expect(await balance(workspaceId)).toBe('10.40');
    expect(await events('billing.topup.completed', workspaceId)).toHaveLength(1);
    expect(await autoTopups.chargeSucceeded('atp_unknown', 'pi_x')).toBe(false);
    expect(await autoTopups.chargeFailed('atp_unknown', 'card_declined')).toBe(false);
  });

  it('start one charge when concurrent RecordUsage calls cross the threshold (the RPC path of usage)', async () => {
    const workspaceId = await enabledWorkspace({ threshold: '0.80' });
    const keys = { workspaceOf: async () => workspaceId } as unknown as KeyDirectory;
    const { db, recordEvent } = service.runtime;
    const usage = new UsageLedger({ db, pricing, accounts, ledger, keys, recordEvent });
    const record = () =>
      usage.record({
        generationId: newId('gen'),
        keyId: 'key_rpc',
        workspaceId,
        model: 'acme/model',
        inputTokens: 1n,
        outputTokens: 1n,
        upstreamCostUsd: '0.02',
      });
    const answers = await Promise.all(Array.from({ length: 20 }, record)); // 20 × 0.021 = 0.42
    expect(answers.every((answer) => answer.costUsd === '0.021')).toBe(true);
    expect(await balance(workspaceId)).toBe('0.580');
    expect(await listCharges(db, workspaceId)).toHaveLength(1);
  });

  it('start exactly one charge for 50 concurrent debits crossing the threshold, and none more while it is pending', async () => {
    const workspaceId = await enabledWorkspace({ threshold: '0.80' });
    await Promise.all(Array.from({ length: 50 }, () => debit(workspaceId, '0.01')));
    expect(await balance(workspaceId)).toBe('0.50');
    expect(await listCharges(service.runtime.db, workspaceId)).toHaveLength(1);
    // Back above the threshold and below again while the charge is pending: still one.
    await credit(workspaceId, '1.00');
    await Promise.all(Array.from({ length: 10 }, () => debit(workspaceId, '0.10')));
    expect(await listCharges(service.runtime.db, workspaceId)).toHaveLength(1);
    // Two workers (two replicas) draining at once: the card is charged once.
    await Promise.all([autoTopups.drain(), new AutoTopups(deps()).drain()]);
    expect(callsOf(workspaceId)).toHaveLength(1);
    expect(await balance(workspaceId)).toBe('10.50');
  });

  it('never charge past the monthly limit, and again in the next calendar month (UTC)', async () => {
    const workspaceId = await enabledWorkspace({ threshold: '5', amount: '10', limit: '25' });
    // Saved below the threshold: a crossing already.
    expect(await listCharges(service.runtime.db, workspaceId)).toHaveLength(1);
    await autoTopups.drain(); // 11.00
    await debit(workspaceId, '6.50'); // 4.50: second charge (20 ≤ 25)
    await autoTopups.drain(); // 14.50
    await debit(workspaceId, '10'); // 4.50: a third would make 30 > 25
    await autoTopups.drain();
    expect((await listCharges(service.runtime.db, workspaceId)).map((c) => c.status)).toEqual(['succeeded', 'succeeded']);
    expect(await balance(workspaceId)).toBe('4.50');
    expect((await autoTopups.get(workspaceId)).chargedThisMonthUsd).toBe('20.00');
    now = new Date('2026-12-01T00:00:01Z');
    expect((await autoTopups.get(workspaceId)).chargedThisMonthUsd).toBe('0.00');
    await credit(workspaceId, '1');
    await debit(workspaceId, '1'); // 4.50 again, crossing from 5.50
    await autoTopups.drain();
    expect((await listCharges(service.runtime.db, workspaceId)).map((c) => [c.month, c.status])).toEqual([
      ['2026-11-01', 'succeeded'],
      ['2026-11-01', 'succeeded'],
      ['2026-12-01', 'succeeded'],
    ]);
    expect(await balance(workspaceId)).toBe('14.50');
  });

  it('count a charge left unanswered (provider_unanswered) toward the monthly limit: the provider may still take it', async () => {
    const workspaceId = await enabledWorkspace({ threshold: '5', amount: '10', limit: '15' }); // saved below: charge 1
    provider.answer = async (id, of) => {
      if (of === workspaceId) throw retryLater('payment_provider_unavailable', 'Stripe timed out', 5, Code.Unavailable);
      return { status: 'succeeded', providerPaymentId: `pi_${id}` };
    };
    await autoTopups.drain();
    const [unanswered] = await listCharges(service.runtime.db, workspaceId);
    expect(unanswered).toMatchObject({ status: 'pending', attempts: 1 });
    // 23 hours on, still unanswered: counted failed at its next attempt.
    await service.runtime
      .db('auto_topup_charges')
      .where({ id: unanswered.id })
      .update({ created_at: service.runtime.db.raw("now() - interval '24 hours'"), claimed_until: null });
    await autoTopups.drain();
    expect(await listCharges(service.runtime.db, workspaceId)).toMatchObject([{ status: 'failed', failure_reason: 'provider_unanswered' }]);
    expect((await autoTopups.get(workspaceId)).chargedThisMonthUsd).toBe('10.00');

    // A new crossing: a second charge would make 20 > 15.
    await autoTopups.update({ workspaceId, userId: 'usr_owner' }, { enabled: true });
    expect(await listCharges(service.runtime.db, workspaceId)).toHaveLength(1);
    // The provider took it after all: credited, and the month stays within its limit.
    expect(await autoTopups.chargeSucceeded(unanswered.id, `pi_${unanswered.id}`)).toBe(true);
    expect(await balance(workspaceId)).toBe('11.00');
    expect((await autoTopups.get(workspaceId)).chargedThisMonthUsd).toBe('10.00');
  });

  it('report each failed charge and switch off after 3 in a row (reason charge_failures)', async () => {
    provider.answer = async (id) => ({ status: 'failed', reason: 'card_declined', providerPaymentId: `pi_${id}` });
    const workspaceId = await enabledWorkspace({ threshold: '5' }); // saved below: charge 1
    await autoTopups.drain();
    expect(await autoTopups.get(workspaceId)).toMatchObject({ enabled: true, consecutiveFailures: 1 });
    // A failed charge is not attempted again by further debits below the threshold.
    await debit(workspaceId, '0.10');
    expect(await listCharges(service.runtime.db, workspaceId)).toHaveLength(1);
    // Each new crossing: saving the settings again, a balance back above and below.
    await autoTopups.update({ workspaceId, userId: 'usr_owner' }, { enabled: true });
    await autoTopups.drain();
    await credit(workspaceId, '5');
    await debit(workspaceId, '1');
    await autoTopups.drain();
    expect(await autoTopups.get(workspaceId)).toMatchObject({
      enabled: false,
      consecutiveFailures: 3,
      disabledReason: 'charge_failures',
      chargedThisMonthUsd: '0.00',
    });
    const failed = await events('billing.auto_topup.failed', workspaceId);
    expect(failed.map((e) => [e.reason, e.consecutive_failures, e.disabled])).toEqual([
      ['card_declined', 1, false],
      ['card_declined', 2, false],
      ['card_declined', 3, true],
    ]);
    expect((await events('billing.auto_topup.updated', workspaceId)).at(-1)).toMatchObject({ enabled: false, reason: 'charge_failures' });
    // Off: a crossing starts nothing.
    await credit(workspaceId, '5'); // 9.90
    await debit(workspaceId, '5'); // 4.90
    expect(await listCharges(service.runtime.db, workspaceId)).toHaveLength(3);
    // Switched on again by a user (below the threshold: a crossing): a fresh count.
    provider.answer = async (id) => ({ status: 'succeeded', providerPaymentId: `pi_${id}` });
    expect(await autoTopups.update({ workspaceId, userId: 'usr_owner' }, { enabled: true })).toMatchObject({
      consecutiveFailures: 0,
      disabledReason: undefined,
    });
    await autoTopups.drain();
    expect(await balance(workspaceId)).toBe('14.90');
  });

  it('start no charge when a refund or a lost dispute takes the balance below the threshold (the low-balance notice still fires)', async () => {
    const workspaceId = await enabledWorkspace({ threshold: '0.50', low: '0.80' });
    for (const type of ['refund', 'dispute'] as const) {
      await service.runtime.db.transaction((trx) => ledger.post(trx, { workspaceId, type, amountUsd: '-0.60', reference: `${type}-1` }));
      await credit(workspaceId, '0.60');
    }
    expect(await listCharges(service.runtime.db, workspaceId)).toEqual([]);
    expect(await events('billing.balance.low', workspaceId)).toHaveLength(2);
  });

  it('drop a charge not yet made when auto top-up was switched off since, counting no failure', async () => {
    const workspaceId = await enabledWorkspace({ threshold: '5' }); // saved below: a pending charge
    await autoTopups.update({ workspaceId, userId: 'usr_owner' }, { enabled: false });
    await autoTopups.drain();
    expect(callsOf(workspaceId)).toEqual([]);
    expect(await listCharges(service.runtime.db, workspaceId)).toMatchObject([{ status: 'failed', failure_reason: 'auto_topup_disabled' }]);
    expect(await autoTopups.get(workspaceId)).toMatchObject({ consecutiveFailures: 0 });
    expect(await events('billing.auto_topup.failed', workspaceId)).toEqual([]);
  });

  it('stop trying a declining card after 6 failed charges in a day, however often auto top-up is switched on again', async () => {
    provider.answer = async (id) => ({ status: 'failed', reason: 'card_declined', providerPaymentId: `pi_${id}` });
    const workspaceId = await enabledWorkspace({ threshold: '5' });
    await autoTopups.drain();
    for (let i = 0; i < 8; i++) {
      await autoTopups.update({ workspaceId, userId: 'usr_owner' }, { enabled: false });
      await autoTopups.update({ workspaceId, userId: 'usr_owner' }, { enabled: true });
      await autoTopups.drain();
    }
    expect(callsOf(workspaceId)).toHaveLength(6);
  });

  it('keep an unanswered charge pending and retry it with the same idempotency key, crediting once', async () => {
    const workspaceId = await enabledWorkspace({ threshold: '5' });
    let answers = 0;
    provider.answer = async (id, of) => {
      // Pending charges other tests left are declined.
      if (of !== workspaceId) return { status: 'failed', reason: 'card_declined' };
      answers += 1;
      if (answers === 1) throw retryLater('payment_provider_unavailable', 'Stripe timed out', 5, Code.Unavailable);
      if (answers === 2) return new Promise<never>(() => undefined); // never answers: our timeout
      return { status: 'succeeded', providerPaymentId: `pi_${id}` };
    };
    await autoTopups.drain();
    expect((await listCharges(service.runtime.db, workspaceId))[0].status).toBe('pending');
    await new Promise((resolve) => setTimeout(resolve, 5));
    await autoTopups.drain(); // times out after 500 ms
    expect((await listCharges(service.runtime.db, workspaceId))[0].status).toBe('pending');
    expect(await balance(workspaceId)).toBe('1.00');
    await new Promise((resolve) => setTimeout(resolve, 5));
    await autoTopups.drain();
    const [charge] = await listCharges(service.runtime.db, workspaceId);
    expect(charge).toMatchObject({ status: 'succeeded', attempts: 3 });
    expect(new Set(callsOf(workspaceId).map((c) => c.id))).toEqual(new Set([charge.id]));
    expect(callsOf(workspaceId)).toHaveLength(3);
    expect(await balance(workspaceId)).toBe('11.00');
  });

  it('credit a charge whose provider event comes before (or instead of) its answer, and a late success of one counted failed', async () => {
    const workspaceId = await enabledWorkspace({ threshold: '5' });
    const [pending] = await listCharges(service.runtime.db, workspaceId);
    // The worker's process died after charging; the provider's event credits it.
    expect(await autoTopups.chargeSucceeded(pending.id, 'pi_event', 'req_webhook')).toBe(true);
    await autoTopups.drain();
    expect(callsOf(workspaceId)).toEqual([]);
    expect(await balance(workspaceId)).toBe('11.00');

    const other = await enabledWorkspace({ threshold: '5' });
    const [declined] = await listCharges(service.runtime.db, other);
    expect(await autoTopups.chargeFailed(declined.id, 'authentication_required', 'pi_late')).toBe(true);
    expect(await autoTopups.chargeSucceeded(declined.id, 'pi_late')).toBe(true);
    expect(await autoTopups.get(other)).toMatchObject({ consecutiveFailures: 0, chargedThisMonthUsd: '10.00' });
    expect(await balance(other)).toBe('11.00');
  });

  it('fail a charge with no saved method left (payment_method_missing)', async () => {
    const workspaceId = await enabledWorkspace({ threshold: '5' });
    methods.delete(workspaceId);
    await autoTopups.drain();
    expect(callsOf(workspaceId)).toEqual([]);
    expect((await events('billing.auto_topup.failed', workspaceId)).map((e) => e.reason)).toEqual(['payment_method_missing']);
  });
});

describe('billing.balance.low', () => {
  it('fires once per crossing below low_balance_threshold_usd, with auto top-up on or off', async () => {
    const workspaceId = newId('org');
    await autoTopups.update({ workspaceId, userId: 'usr_owner' }, { lowBalanceThresholdUsd: amount('0.80') });
    await debit(workspaceId, '0.10'); // 0.90
    await debit(workspaceId, '0.15'); // 0.75: crossed
    await debit(workspaceId, '0.05'); // 0.70
    await credit(workspaceId, '1'); // 1.70
    await debit(workspaceId, '0.90'); // 0.80: not below
    await debit(workspaceId, '0.01'); // 0.79: crossed
    const low = await events('billing.balance.low', workspaceId);
    expect(low.map((e) => [e.balance_usd, e.threshold_usd])).toEqual([
      ['0.75', '0.80'],
      ['0.79', '0.80'],
    ]);
    expect(Number(low[1].balance_version)).toBeGreaterThan(Number(low[0].balance_version));
  });
});

describe('the auto top-up handlers', () => {
  it('let only owners and admins read and change the settings', async () => {
    const handlers = prepareBilling(service.runtime, readBillingConfig({}));
    const clientAs = service.serve((router) => registerRoutes(router, { ...handlers, autoTopups }));
    const workspaceId = newId('org');
    const member = (role: string) => ({ caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role });
    const input = { thresholdUsd: amount('5'), amountUsd: amount('20'), monthlyLimitUsd: amount('100') };
    expect(await refusalOf(clientAs(BillingService, member('developer')).updateAutoTopup(input))).toMatchObject({ code: Code.PermissionDenied });
    expect(await clientAs(BillingService, member('admin')).updateAutoTopup(input)).toMatchObject({ enabled: false, thresholdUsd: '5' });
    expect(await refusalOf(clientAs(BillingService, member('developer')).getAutoTopup({}))).toMatchObject({ code: Code.PermissionDenied });
    expect(await clientAs(BillingService, member('admin')).getAutoTopup({})).toMatchObject({ thresholdUsd: '5', chargedThisMonthUsd: '0.00' });
    expect(await refusalOf(clientAs(BillingService, member('owner')).updateAutoTopup({ enabled: true }))).toMatchObject({
      code: Code.FailedPrecondition,
      error: 'payment_method_required',
    });
  });
});
