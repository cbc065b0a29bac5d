import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Accounts } from '@switchboard/billing/accounts';
import { Generations } from '@switchboard/billing/generations';
import { Reports } from '@switchboard/billing/reports';
import { insertUsageAndDebit } from '@switchboard/billing/store/usage';
import { createDb, type Knex, migrate } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { defaultPricingPath, Pricing } from '@switchboard/runtime/pricing';
import { requireEnv } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Billing's reports on their own, against a migrated schema of their own, with time set by an
 * injected clock: exact decimals per day across a month boundary, the upgrade hint, the prices a
 * plan bills, and the feedback of the activity log (latest wins, before or after its usage).
 */

const schema = `billing_domain_${randomBytes(3).toString('hex')}`;
const pricing = Pricing.load(defaultPricingPath);
const catalog = ModelCatalog.parse(
  JSON.stringify({
    regions: { overseas: { base_url: 'https://overseas.invalid/v1', api_key_env: 'A_KEY' }, cn: { base_url: 'https://cn.invalid/v1', api_key_env: 'B_KEY' } },
    models: [
      { id: 'm-one', region: 'overseas', tiers: ['fast'], input_usd_per_1m: '0.15', output_usd_per_1m: '0.60' },
      { id: 'm-one', region: 'cn', tiers: [], input_usd_per_1m: '0.10', output_usd_per_1m: '0.30' },
    ],
  }),
);
let db: Knex;
let now = new Date('2026-03-02T10:00:00Z');
let accounts: Accounts;
let reports: Reports;

beforeAll(async () => {
  db = createDb(requireEnv('DATABASE_URL'), schema, 4);
  await migrate(db, schema, path.join(fileURLToPath(new URL('../dist/migrations/', import.meta.url))));
  accounts = new Accounts({ db, pricing, openingCreditUsd: '1.00' });
  reports = new Reports({ db, pricing, accounts, catalog, clock: () => now });
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

  it('opens every workspace with the opening credit, once, and the default plan', async () => {
    const ws = newId('org');
    await Promise.all(Array.from({ length: 10 }, () => new Accounts({ db, pricing, openingCreditUsd: '1.00' }).ensure(ws)));
    expect(await reports.balance(ws)).toMatchObject({ balanceUsd: '1.00', currency: 'USD' });
    expect((await reports.plan(ws)).plan).toMatchObject({ planId: 'payg', monthlyFeeUsd: '0', discounts: { passthroughMarkupPct: '5' } });
  });
});

describe('prices', () => {
  it("bills the tiers less the plan's discount and every catalog model, per region, plus the plan's markup", async () => {
    const ws = newId('org');
    await accounts.ensure(ws);
    expect(await reports.prices(ws)).toEqual({
      version: pricing.version,
      tiers: [
        { tier: 'fast', inputUsdPer1m: '0.1', outputUsdPer1m: '0.4' },
        { tier: 'balanced', inputUsdPer1m: '0.5', outputUsdPer1m: '2' },
      ],
      models: [
        { id: 'm-one', region: 'overseas', tiers: ['fast'], inputUsdPer1m: '0.1575', outputUsdPer1m: '0.63' },
        { id: 'm-one', region: 'cn', tiers: [], inputUsdPer1m: '0.105', outputUsdPer1m: '0.315' },
      ],
    });
    await db('accounts').where({ workspace_id: ws }).update({ plan_id: 'pro' });
    const pro = await reports.prices(ws);
    expect(pro.tiers).toEqual([
      { tier: 'fast', inputUsdPer1m: '0.08', outputUsdPer1m: '0.32' },
      { tier: 'balanced', inputUsdPer1m: '0.4', outputUsdPer1m: '1.6' },
    ]);
    expect(pro.models?.[0]).toMatchObject({ inputUsdPer1m: '0.1545', outputUsdPer1m: '0.618' });
  });
});

describe('generation feedback', () => {
  const generations = () => new Generations({ db });
  const rated = (generationId: string, workspaceId: string, rating: number, at: string, tags: string[] = []) =>
    ({
      event_id: newId('evt'),
      type: 'feedback.recorded',
      workspace_id: workspaceId,
      occurred_at: at,
      producer: 'conversations',
      request_id: '',
      json: {},
      data: { generationId, workspaceId, feedbackId: newId('fb'), rating, tags, tier: 'fast', model: 'm-one' },
    }) as unknown as Parameters<Generations['feedbackRecorded']>[1][number];
  const caller = (workspaceId: string) => ({ workspaceId, userId: 'usr_test', principalType: 'user' as const, requestId: 'req_test' }) as never;

  it('keeps the latest rating of a generation, also when it arrives before its usage, and never joins another workspace', async () => {
    const ws = newId('org');
    const other = newId('org');
    const generationId = newId('gen');
    // Before the usage row: stored, and joined once the row is there.
    await db.transaction((trx) => generations().feedbackRecorded(trx, [rated(generationId, ws, -1, '2026-03-02T10:00:01Z', ['slow'])]));
    await accounts.ensure(ws);
    await db.transaction((trx) =>
      insertUsageAndDebit(trx, {
        id: newId('usg'),
        generationId,
        workspaceId: ws,
        keyId: 'key_test',
        model: 'service/fast',
        routedModel: 'm-one',
        tier: 'fast',
        inputTokens: '2',
        outputTokens: '8',
        upstreamCostUsd: null,
        costUsd: '0.0000034',
        planId: 'payg',
        pricingVersion: pricing.version,
        reservationId: null,
        occurredAt: new Date('2026-03-02T10:00:00Z'),
      }),
    );
    const feedbackOf = async () => (await generations().get(caller(ws), generationId)).feedback ?? null;
    expect(await feedbackOf()).toEqual({ rating: -1, tags: ['slow'] });
    // A newer rating replaces it; an older one arriving late (a redelivery) does not; two in one batch: the last.
    await db.transaction((trx) => generations().feedbackRecorded(trx, [rated(generationId, ws, 1, '2026-03-02T10:00:03Z', ['accurate'])]));
    await db.transaction((trx) => generations().feedbackRecorded(trx, [rated(generationId, ws, -1, '2026-03-02T10:00:02Z')]));
    expect(await feedbackOf()).toEqual({ rating: 1, tags: ['accurate'] });
    await db.transaction((trx) =>
      generations().feedbackRecorded(trx, [rated(generationId, ws, -1, '2026-03-02T10:00:04Z'), rated(generationId, ws, 1, '2026-03-02T10:00:05Z', ['b'])]),
    );
    expect(await feedbackOf()).toEqual({ rating: 1, tags: ['b'] });
    // Another workspace's generation is not found, and feedback stated for it never shows.
    await expect(generations().get(caller(other), generationId)).rejects.toThrow(/No such generation/);
    const foreign = newId('gen');
    await db.transaction((trx) => generations().feedbackRecorded(trx, [rated(foreign, other, 1, '2026-03-02T10:00:06Z')]));
    await expect(generations().get(caller(ws), foreign)).rejects.toThrow(/No such generation/);
  });
});
