import { create, fromJson } from '@bufbuild/protobuf';
import { timestampFromDate, ValueSchema } from '@bufbuild/protobuf/wkt';
import { readBillingConfig } from '@switchboard/billing/config';
import type { BalanceMove } from '@switchboard/billing/ledger';
import { type PreparedBilling, prepareBilling } from '@switchboard/billing/prepare';
import { type UsageRecord, UsageRecordSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService } from '@switchboard/runtime/in-process';
import { formatMoney, Money } from '@switchboard/runtime/money';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The ledger built as main.ts builds it, on the test Postgres: every change of a balance has its
 * entry (usage one per workspace, day and tier), the entries always sum to the balance, the list
 * pages through every entry once, and a month's statement reconciles exactly.
 */

let service: InProcessService;
let billing: PreparedBilling;
const moves: BalanceMove[] = [];

beforeAll(async () => {
  service = await inProcessService('billing', new URL('../dist/migrations/', import.meta.url));
  billing = prepareBilling(service.runtime, readBillingConfig({ FREE_CREDIT_USD: '1.00', SANDBOX_OPENING_CREDIT_USD: '1.00', BILLING_SANDBOX: 'true' }));
  billing.ledger.watch({ balanceChanged: async (_trx, changed) => void moves.push(...changed) });
});

afterAll(() => service?.stop());

const db = () => service.runtime.db;

function usage(workspaceId: string, tier: 'fast' | 'balanced' | 'passthrough', costUsd: string): UsageRecord {
  return create(UsageRecordSchema, {
    generationId: newId('gen'),
    keyId: 'key_ledger',
    workspaceId,
    model: tier === 'passthrough' ? 'acme/model' : `service/${tier}`,
    inputTokens: 10n,
    outputTokens: 10n,
    occurredAt: timestampFromDate(new Date()),
    costUsd,
    tier,
    planId: 'payg',
    pricingVersion: '2026-11-01',
  });
}

async function balanceOf(workspaceId: string): Promise<string> {
  return (await billing.reports.balance(workspaceId)).balanceUsd!;
}

/** Σ of the workspace's entries, in Postgres numeric arithmetic. */
async function ledgerSum(workspaceId: string): Promise<string> {
  const row = await db()('ledger_entries').where({ workspace_id: workspaceId }).first(db().raw('COALESCE(sum(amount_usd), 0)::text AS sum'));
  return row.sum;
}

const thisMonth = () => new Date().toISOString().slice(0, 7);

describe('ledger', () => {
  it('has an entry for every change, usage per day and tier, summing to the balance; the statement reconciles exactly', async () => {
    const ws = newId('org');
    const topup = await billing.topups.create({ workspaceId: ws }, { amount: fromJson(ValueSchema, '25.00'), idempotencyKey: 'l-1' });
    const token = topup.checkoutUrl!.split('/').pop()!;
    await billing.topups.completeSandbox(token);
    await db().transaction((trx) =>
      billing.settlement.settle(
        [usage(ws, 'fast', '0.1'), usage(ws, 'fast', '0.2'), usage(ws, 'balanced', '0.0000001'), usage(ws, 'passthrough', '1.05')],
        trx,
      ),
    );
    await db().transaction((trx) => billing.settlement.settle([usage(ws, 'fast', '0.3')], trx));
    await db().transaction((trx) => billing.ledger.post(trx, { workspaceId: ws, type: 'refund', amountUsd: '-5.00', reference: 're_test_1' }));

    expect(await balanceOf(ws)).toBe('19.3499999');
    expect(await ledgerSum(ws)).toBe('19.3499999');
    const { data, hasMore } = await billing.statements.entries(ws, { limit: 100 });
    expect(hasMore).toBe(false);
    // Newest change first: the fast entry grew after the others were written.
    expect(data!.map((entry) => [entry.type, entry.amountUsd, entry.balanceAfterUsd])).toEqual([
      ['refund', '-5.00', '19.3499999'],
      ['usage', '-0.6', '24.3499999'],
      ['usage', '-1.05', '24.6499999'],
      ['usage', '-0.0000001', '24.6499999'],
      ['topup', '25.00', '26.00'],
      ['free_credit', '1.00', '1.00'],
    ]);
    const day = new Date().toISOString().slice(0, 10);
    expect(data!.find((entry) => entry.amountUsd === '-0.6')?.reference).toBe(`usage:${day}:fast`);
    expect(data!.find((entry) => entry.type === 'topup')?.reference).toBe(topup.checkoutId);

    const statement = await billing.statements.statement(ws, thisMonth());
    expect(statement).toEqual({
      month: thisMonth(),
      currency: 'USD',
      openingBalanceUsd: '0',
      creditsUsd: '26.00',
      usageUsd: '1.6500001',
      usageByTierUsd: { fast: '0.6', balanced: '0.0000001', passthrough: '1.05', byok: '0' },
      refundsUsd: '5.00',
      closingBalanceUsd: '19.3499999',
    });
    const { openingBalanceUsd, creditsUsd, usageUsd, refundsUsd, closingBalanceUsd } = statement;
    expect(new Money(openingBalanceUsd!).plus(creditsUsd!).minus(usageUsd!).minus(refundsUsd!).eq(closingBalanceUsd!)).toBe(true);
    // The month before: nothing had happened yet.
    const before = new Date();
    before.setUTCDate(1);
    before.setUTCMonth(before.getUTCMonth() - 1);
    expect(await billing.statements.statement(ws, before.toISOString().slice(0, 7))).toMatchObject({
      openingBalanceUsd: '0',
      closingBalanceUsd: '0',
      creditsUsd: '0',
    });

    // Watchers saw each move with the balance before and after.
    const mine = moves.filter((move) => move.workspaceId === ws);
    expect(mine.map((move) => [formatMoney(move.beforeUsd), formatMoney(move.afterUsd)])).toEqual([
      ['1', '26'],
      ['26', '24.6499999'],
      ['24.6499999', '24.3499999'],
      ['24.3499999', '19.3499999'],
    ]);
  });

  it('pages through every entry once, newest change first', async () => {
    const ws = newId('org');
    await balanceOf(ws);
    for (let i = 0; i < 5; i++) {
      await db().transaction((trx) => billing.ledger.post(trx, { workspaceId: ws, type: 'adjustment', amountUsd: `${i + 1}`, reference: `adj-${i}` }));
    }
    const seen: string[] = [];
    let after: string | undefined;
    do {
      const page = await billing.statements.entries(ws, { limit: 2, after });
      seen.push(...page.data!.map((entry) => entry.reference!));
      after = page.nextCursor;
    } while (after);
    expect(seen).toEqual(['adj-4', 'adj-3', 'adj-2', 'adj-1', 'adj-0', 'opening credit (sandbox)']);
    await expect(billing.statements.entries(ws, { limit: 0 })).rejects.toThrow(/limit/);
    await expect(billing.statements.entries(ws, { after: 'nope!' })).rejects.toThrow(/after/);
  });

  it('refuses a month that is not YYYY-MM or is after the current one', async () => {
    const ws = newId('org');
    for (const month of ['2026-13', '2026-1', '26-11', '', '2026-11-01', '0099-01', '1969-12']) {
      await expect(billing.statements.statement(ws, month), month).rejects.toThrow(/month must be/);
    }
    const next = new Date();
    next.setUTCDate(1);
    next.setUTCMonth(next.getUTCMonth() + 1);
    await expect(billing.statements.statement(ws, next.toISOString().slice(0, 7))).rejects.toThrow(/after the current month/);
  });
});
