import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Accounts } from '@switchboard/billing/accounts';
import { Reports } from '@switchboard/billing/reports';
import { insertUsageAndDebit } from '@switchboard/billing/store/usage';
import { createDb, type Knex, migrate } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import { defaultPricingPath, Pricing } from '@switchboard/runtime/pricing';
import { requireEnv } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Billing's reports on their own, against a migrated schema of their own, with time set by an
 * injected clock: exact decimals per day across a month boundary, and the upgrade hint.
 */

const schema = `billing_domain_${randomBytes(3).toString('hex')}`;
const pricing = Pricing.load(defaultPricingPath);
let db: Knex;
let now = new Date('2026-03-02T10:00:00Z');
let accounts: Accounts;
let reports: Reports;

beforeAll(async () => {
  db = createDb(requireEnv('DATABASE_URL'), schema, 4);
  await migrate(db, schema, path.join(fileURLToPath(new URL('../dist/migrations/', import.meta.url))));
  accounts = new Accounts({ db, pricing, freeCreditUsd: '1.00' });
  reports = new Reports({ db, pricing, accounts, clock: () => now });
});

afterAll(async () => {
  await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  await db.destroy();
});

/** A usage row as RecordUsage writes it, priced under `planId` at `at`. */
async function record(
  workspaceId: string,
  at: string,
  usage: { tier: 'fast' | 'balanced' | 'passthrough' | 'byok'; input?: bigint; output?: bigint; upstream?: string },
) {
  await accounts.ensure(workspaceId);
  const priced = { tier: usage.tier, inputTokens: usage.input ?? 0n, outputTokens: usage.output ?? 0n, upstreamCostUsd: usage.upstream };
  const costUsd = pricing.cost(priced, 'payg').toFixed();
  await db.transaction((trx) =>
    insertUsageAndDebit(trx, {
      id: newId('usg'),
      generationId: newId('gen'),
      workspaceId,
      keyId: 'key_test',
      model: usage.tier === 'fast' ? 'service/fast' : usage.tier === 'balanced' ? 'service/balanced' : 'acme/model',
      routedModel: null,
      tier: usage.tier,
      inputTokens: priced.inputTokens.toString(),
      outputTokens: priced.outputTokens.toString(),
      upstreamCostUsd: usage.upstream ?? null,
      costUsd,
      planId: 'payg',
      pricingVersion: pricing.version,
      reservationId: null,
      occurredAt: new Date(at),
    }),
  );
  return costUsd;
}

describe('reports', () => {
  it('adds 0.1 and 0.2 to exactly 0.3, per day across a month boundary, days without usage as zeros', async () => {
    const ws = newId('org');
    await record(ws, '2026-02-27T23:59:59Z', { tier: 'passthrough', upstream: '0.1' }); // 0.105
    await record(ws, '2026-02-27T00:00:00Z', { tier: 'passthrough', upstream: '0.2' }); // 0.21
    await record(ws, '2026-03-01T00:00:00Z', { tier: 'fast', input: 1000n, output: 1000n }); // 0.0005
    await record(ws, '2026-02-20T12:00:00Z', { tier: 'fast', input: 1_000_000n }); // outside 5 days
    const usage = await reports.usage(ws, 5);
    expect(usage.days).toBe(5);
    expect(usage.data?.map((d) => [d.date, d.costUsd, Number(d.requests), Number(d.inputTokens), Number(d.outputTokens)])).toEqual([
      ['2026-02-26', '0', 0, 0, 0],
      ['2026-02-27', '0.315', 2, 0, 0],
      ['2026-02-28', '0', 0, 0, 0],
      ['2026-03-01', '0.0005', 1, 1000, 1000],
      ['2026-03-02', '0', 0, 0, 0],
    ]);
    expect(usage.totalCostUsd).toBe('0.3155');
    expect((await reports.usage(ws, 30)).totalCostUsd).toBe('0.4155');
    const byTier = await reports.usageByTier(ws, 5);
    expect(byTier.byTier).toMatchObject({
      fast: { costUsd: '0.0005', requests: 1n },
      balanced: { costUsd: '0', requests: 0n },
      passthrough: { costUsd: '0.315', requests: 2n },
      byok: { costUsd: '0', requests: 0n },
    });
    await expect(reports.usage(ws, 0)).rejects.toThrow(/days/);
    await expect(reports.usage(ws, 366)).rejects.toThrow(/days/);
  });

  it('recommends a plan only when it would have been cheaper over the last 30 days, fee included', async () => {
    const ws = newId('org');
    expect(await reports.upgradeHint(ws)).toEqual({ hint: {} });
    // 200M + 200M fast tokens: payg 20 + 80 = 100; pro (20% off) 80 + the 20.00 fee = 100: not cheaper.
    await record(ws, '2026-02-20T00:00:00Z', { tier: 'fast', input: 200_000_000n, output: 200_000_000n });
    expect(await reports.upgradeHint(ws)).toEqual({ hint: {} });
    // + 100M + 100M: payg 150, pro 120 + 20 = 140: 10 ÷ 150 = 6.666…% → 6.7.
    await record(ws, '2026-03-01T00:00:00Z', { tier: 'fast', input: 100_000_000n, output: 100_000_000n });
    expect(await reports.upgradeHint(ws)).toEqual({ hint: { recommendPlan: 'pro', savingsPct: 6.7 } });
    // Usage older than 30 days does not count.
    now = new Date('2026-03-25T10:00:00Z');
    expect(await reports.upgradeHint(ws)).toEqual({ hint: {} });
    now = new Date('2026-03-02T10:00:00Z');
  });

  it('starts every workspace with the free credit, once, and the default plan', async () => {
    const ws = newId('org');
    await Promise.all(Array.from({ length: 10 }, () => new Accounts({ db, pricing, freeCreditUsd: '1.00' }).ensure(ws)));
    expect(await reports.balance(ws)).toMatchObject({ balanceUsd: '1.00', currency: 'USD' });
    expect((await reports.plan(ws)).plan).toMatchObject({ planId: 'payg', monthlyFeeUsd: '0', discounts: { passthroughMarkupPct: '5' } });
  });
});
