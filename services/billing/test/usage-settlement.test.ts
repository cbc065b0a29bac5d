import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { readBillingConfig } from '@switchboard/billing/config';
import { type PreparedBilling, prepareBilling } from '@switchboard/billing/prepare';
import { insertUsages, type NewUsage } from '@switchboard/billing/store/usage';
import { type UsageRecord, UsageRecordSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService } from '@switchboard/runtime/in-process';
import { Money } from '@switchboard/runtime/money';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Usage records settled a batch at a time, as billing's work consumer hands them over: the
 * settlement built as main.ts builds it, called in a transaction of its own on the test Postgres.
 * Workspaces open with 1.00 (the sandbox's SANDBOX_OPENING_CREDIT_USD), opened by their first record.
 */

let service: InProcessService;
let billing: PreparedBilling;

beforeAll(async () => {
  service = await inProcessService('billing', new URL('../dist/migrations/', import.meta.url));
  billing = prepareBilling(service.runtime, readBillingConfig({ BILLING_SANDBOX: 'true', SANDBOX_OPENING_CREDIT_USD: '1.00' }));
});

afterAll(() => service?.stop());

const settle = (records: UsageRecord[]) => service.runtime.db.transaction((trx) => billing.settlement.settle(records, trx));

/** A record as the data plane publishes it: service/fast, priced under payg with the shipped file. */
function record(workspaceId: string, fields: Partial<UsageRecord> = {}): UsageRecord {
  return create(UsageRecordSchema, {
    generationId: newId('gen'),
    keyId: 'key_settlement',
    workspaceId,
    model: 'service/fast',
    routedModel: 'm-small',
    inputTokens: 1000n,
    outputTokens: 500n,
    byok: false,
    occurredAt: timestampFromDate(new Date()),
    costUsd: '0.0003',
    tier: 'fast',
    planId: 'payg',
    pricingVersion: '2026-11-01',
    ...fields,
  });
}

async function account(workspaceId: string): Promise<{ balance: string; version: string }> {
  const row = await service.runtime
    .db('accounts')
    .where({ workspace_id: workspaceId })
    .first(service.runtime.db.raw('balance_usd::text AS balance, balance_version::text AS version'));
  return row;
}

async function usageRows(workspaceId: string): Promise<Array<{ generation_id: string; cost_usd: string }>> {
  return service.runtime
    .db('usage_records')
    .where({ workspace_id: workspaceId })
    .select('generation_id', service.runtime.db.raw('cost_usd::text AS cost_usd'))
    .orderBy('generation_id');
}

interface RecordedEvent {
  workspace_id: string;
  data: { usage_id: string; generation_id: string; cost_usd: string; balance_usd: string; balance_version: string; cap_lease_id?: string | null };
}

async function events(workspaceId: string): Promise<RecordedEvent[]> {
  const rows: Array<{ payload: RecordedEvent }> = await service.runtime
    .db('outbox')
    .where('subject', 'like', '%.billing.usage.recorded')
    .whereRaw("payload->>'workspace_id' = ?", [workspaceId])
    .orderBy('id')
    .select('payload');
  return rows.map((row) => row.payload);
}

describe('usage settlement', () => {
  it('bills a generation once, however often it comes in a batch or in later batches', async () => {
    const workspaceId = newId('org');
    const first = record(workspaceId);
    await settle([first, record(workspaceId, { generationId: first.generationId, costUsd: '0.5' }), first]);
    await settle([first]);
    expect(await usageRows(workspaceId)).toEqual([{ generation_id: first.generationId, cost_usd: '0.0003' }]);
    // One debit (1.00 − 0.0003), one version, one event.
    expect(await account(workspaceId)).toEqual({ balance: '0.9997', version: '1' });
    expect(await events(workspaceId)).toHaveLength(1);
  });

  it('debits each workspace of a batch once, by the exact sum of its new records, and tells each event the balance after', async () => {
    const [a, b] = [newId('org'), newId('org')];
    // 0.1 + 0.2 is exactly 0.3 here; the published costs are taken as they are, never priced again.
    const batch = [
      record(a, { costUsd: '0.1' }),
      record(b, { costUsd: '0.000000000000000000123' }),
      record(a, { costUsd: '0.2' }),
      record(b, { costUsd: '0.25' }),
      record(a, { costUsd: '0' }),
    ];
    await settle(batch);
    expect(await account(a)).toEqual({ balance: '0.70', version: '1' });
    expect(await account(b)).toEqual({ balance: '0.749999999999999999877', version: '1' });
    const sent = [...(await events(a)), ...(await events(b))];
    expect(sent).toHaveLength(5);
    expect(sent.filter((event) => event.workspace_id === a).every((event) => event.data.balance_usd === '0.70' && event.data.balance_version === '1')).toBe(
      true,
    );
    expect(sent.map((event) => event.data.generation_id).sort()).toEqual(batch.map((item) => item.generationId).sort());
    const answered = batch.reduce((sum, item) => sum.plus(item.costUsd), new Money(0));
    const debited = new Money(2).minus((await account(a)).balance).minus((await account(b)).balance);
    expect(debited.equals(answered)).toBe(true);
  });

  it('writes one event per new row with its cap lease, and settles the balance leases the records used', async () => {
    const workspaceId = newId('org');
    const lease = await billing.leases.lease({ workspaceId, leaseId: '', holder: 'replica-a', usedUsd: '0', wantUsd: '0.5', minUsd: '0.1' });
    const capLeaseId = newId('lse');
    await settle([
      record(workspaceId, { costUsd: '0.125', capLeaseId, balanceLeaseId: lease.leaseId }),
      record(workspaceId, { costUsd: '0.0625', balanceLeaseId: lease.leaseId }),
      // Another workspace's lease is not settled by this workspace's usage.
      record(newId('org'), { costUsd: '0.01', balanceLeaseId: lease.leaseId }),
    ]);
    const sent = await events(workspaceId);
    expect(sent).toHaveLength(2);
    expect(sent.map((event) => event.data.cap_lease_id ?? null).sort()).toEqual([capLeaseId, null].sort());
    expect(sent.every((event) => event.data.usage_id.startsWith('usg_') && event.data.balance_usd === '0.8125')).toBe(true);
    const row = await service.runtime
      .db('balance_leases')
      .where({ id: lease.leaseId })
      .first(service.runtime.db.raw('granted_usd::text AS granted, settled_usd::text AS settled'));
    expect(row).toEqual({ granted: '0.5', settled: '0.1875' });
  });

  it('drops the records that fail their checks, and settles the rest of the batch', async () => {
    const workspaceId = newId('org');
    const good = record(workspaceId, { costUsd: '0.05', pricingVersion: '2026-01-01' });
    await settle([
      record(workspaceId, { generationId: '' }),
      record(workspaceId, { keyId: '' }),
      record(workspaceId, { inputTokens: -1n }),
      record(workspaceId, { costUsd: '1e-3' }),
      record(workspaceId, { costUsd: '-0.1' }),
      record(workspaceId, { costUsd: '' }),
      record(workspaceId, { tier: 'gold' }),
      record(workspaceId, { upstreamCostUsd: 'free' }),
      record(workspaceId, { planId: '' }),
      good,
    ]);
    // Priced under another pricing version: still debited as answered (and logged).
    expect(await usageRows(workspaceId)).toEqual([{ generation_id: good.generationId, cost_usd: '0.05' }]);
    expect(await account(workspaceId)).toEqual({ balance: '0.95', version: '1' });
  });

  it("stores the data plane's facts of each generation, null when absent or out of range, and bills the record all the same", async () => {
    const workspaceId = newId('org');
    const facts = {
      region: 'cn',
      streamed: true,
      status: 'client_closed',
      latencyMs: 812,
      timeToFirstTokenMs: 95,
      overheadMs: 1.234,
      conversationId: 'conv_facts',
    };
    const full = record(workspaceId, facts);
    const bare = record(workspaceId);
    const odd = record(workspaceId, { ...facts, region: 'mars', status: 'exploded', latencyMs: -1, overheadMs: Number.NaN });
    await settle([full, bare, odd]);
    const rows = await service.runtime
      .db('usage_records')
      .where({ workspace_id: workspaceId })
      .select(
        'generation_id',
        'region',
        'streamed',
        'status',
        'latency_ms',
        'time_to_first_token_ms',
        service.runtime.db.raw('overhead_ms::text AS overhead_ms'),
        'conversation_id',
      );
    const byId = new Map(rows.map(({ generation_id: id, ...rest }) => [id, rest]));
    expect(byId.get(full.generationId)).toEqual({
      region: 'cn',
      streamed: true,
      status: 'client_closed',
      latency_ms: 812,
      time_to_first_token_ms: 95,
      overhead_ms: '1.234',
      conversation_id: 'conv_facts',
    });
    expect(byId.get(bare.generationId)).toEqual({
      region: null,
      streamed: null,
      status: null,
      latency_ms: null,
      time_to_first_token_ms: null,
      overhead_ms: null,
      conversation_id: null,
    });
    expect(byId.get(odd.generationId)).toMatchObject({ region: null, status: null, latency_ms: null, time_to_first_token_ms: 95, overhead_ms: null });
    expect(await account(workspaceId)).toEqual({ balance: '0.9991', version: '1' });
  });

  it('adds each newly settled row to the hourly and daily aggregates once, however often it is settled, as the backfill would', async () => {
    const workspaceId = newId('org');
    const at = (iso: string) => timestampFromDate(new Date(iso));
    const first = record(workspaceId, { occurredAt: at('2026-03-04T10:15:00Z'), region: 'overseas', costUsd: '0.1' });
    const batch = [
      first,
      record(workspaceId, { occurredAt: at('2026-03-04T10:59:59.999Z'), region: 'overseas', costUsd: '0.2', inputTokens: 7n, outputTokens: 3n }),
      record(workspaceId, { occurredAt: at('2026-03-04T11:00:00Z'), region: 'overseas', costUsd: '0.000000000000000000123' }),
      // No routed model: the model asked for serves; no region: ''.
      record(workspaceId, { occurredAt: at('2026-03-04T23:59:59Z'), routedModel: undefined, costUsd: '0.05' }),
      record(workspaceId, { occurredAt: at('2026-03-05T00:00:00Z'), keyId: 'key_other', costUsd: '0.3' }),
    ];
    // The same generation twice in a batch (another cost), then the whole batch again: counted once.
    await settle([...batch, record(workspaceId, { generationId: first.generationId, costUsd: '0.5', region: 'overseas', occurredAt: first.occurredAt })]);
    await settle(batch);
    await settle([first]);
    const rollups = async (table: string) => {
      const { rows } = await service.runtime.db.raw(
        `SELECT to_char(bucket_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI') AS bucket, key_id, model, tier, region, requests::text, input_tokens::text,
                output_tokens::text, cost_usd::text FROM ${table} WHERE workspace_id = ? ORDER BY 1, 2, 3, 4, 5`,
        [workspaceId],
      );
      return rows;
    };
    const row = (bucket: string, keyId: string, model: string, region: string, requests: string, input: string, output: string, cost: string) => ({
      bucket,
      key_id: keyId,
      model,
      tier: 'fast',
      region,
      requests,
      input_tokens: input,
      output_tokens: output,
      cost_usd: cost,
    });
    expect(await rollups('usage_rollups_hourly')).toEqual([
      row('2026-03-04T10:00', 'key_settlement', 'm-small', 'overseas', '2', '1007', '503', '0.3'),
      row('2026-03-04T11:00', 'key_settlement', 'm-small', 'overseas', '1', '1000', '500', '0.000000000000000000123'),
      row('2026-03-04T23:00', 'key_settlement', 'service/fast', '', '1', '1000', '500', '0.05'),
      row('2026-03-05T00:00', 'key_other', 'm-small', '', '1', '1000', '500', '0.3'),
    ]);
    expect(await rollups('usage_rollups_daily')).toEqual([
      row('2026-03-04T00:00', 'key_settlement', 'm-small', 'overseas', '3', '2007', '1003', '0.300000000000000000123'),
      row('2026-03-04T00:00', 'key_settlement', 'service/fast', '', '1', '1000', '500', '0.05'),
      row('2026-03-05T00:00', 'key_other', 'm-small', '', '1', '1000', '500', '0.3'),
    ]);
    // The migration's backfill of the same rows gives the same aggregates.
    for (const [table, unit] of [
      ['usage_rollups_hourly', 'hour'],
      ['usage_rollups_daily', 'day'],
    ]) {
      const { rows } = await service.runtime.db.raw(
        `SELECT count(*)::int AS differences FROM (
           (SELECT workspace_id, date_trunc('${unit}', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS bucket_start, key_id, COALESCE(routed_model, model) AS model,
                   tier, COALESCE(region, '') AS region, count(*) AS requests, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cost_usd) AS cost_usd
              FROM usage_records WHERE workspace_id = ? GROUP BY 1, 2, 3, 4, 5, 6
            EXCEPT SELECT workspace_id, bucket_start, key_id, model, tier, region, requests, input_tokens, output_tokens, cost_usd FROM ${table} WHERE workspace_id = ?)
           UNION ALL
           (SELECT workspace_id, bucket_start, key_id, model, tier, region, requests, input_tokens, output_tokens, cost_usd FROM ${table} WHERE workspace_id = ?
            EXCEPT SELECT workspace_id, date_trunc('${unit}', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', key_id, COALESCE(routed_model, model),
                   tier, COALESCE(region, ''), count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd)
              FROM usage_records WHERE workspace_id = ? GROUP BY 1, 2, 3, 4, 5, 6)) d`,
        [workspaceId, workspaceId, workspaceId, workspaceId],
      );
      expect(rows[0].differences, table).toBe(0);
    }
  });

  it('adds only the rows inserted when a batch inserts some of its rows, and those once', async () => {
    const workspaceId = newId('org');
    const at = timestampFromDate(new Date('2026-03-06T08:20:00Z'));
    const [a, b] = [record(workspaceId, { occurredAt: at, costUsd: '0.1' }), record(workspaceId, { occurredAt: at, costUsd: '0.02' })];
    await settle([a]);
    // a again (not inserted) beside b (inserted): the statement's sums are not applied, b's alone are.
    await settle([a, b]);
    await settle([b, a]);
    // Straight through the store, as RecordUsage: two rows of one generation in one statement, one inserted.
    const c = record(workspaceId, { occurredAt: at, costUsd: '0.003' });
    const usageOf = (item: UsageRecord, costUsd: string): NewUsage => ({
      id: newId('usg'),
      generationId: item.generationId,
      workspaceId,
      keyId: item.keyId,
      model: item.model,
      routedModel: item.routedModel ?? null,
      tier: item.tier,
      inputTokens: '1000',
      outputTokens: '500',
      upstreamCostUsd: null,
      costUsd,
      planId: 'payg',
      pricingVersion: '2026-11-01',
      reservationId: null,
      occurredAt: new Date('2026-03-06T08:20:00Z'),
    });
    const inserted = await service.runtime.db.transaction((trx) => insertUsages(trx, [usageOf(c, '0.003'), usageOf(c, '0.5')]));
    expect([...inserted]).toEqual([c.generationId]);
    const { rows } = await service.runtime.db.raw(
      `SELECT 'hourly' AS t, requests::text, cost_usd::text FROM usage_rollups_hourly WHERE workspace_id = ?
       UNION ALL SELECT 'daily', requests::text, cost_usd::text FROM usage_rollups_daily WHERE workspace_id = ? ORDER BY 1`,
      [workspaceId, workspaceId],
    );
    expect(rows).toEqual([
      { t: 'daily', requests: '3', cost_usd: '0.123' },
      { t: 'hourly', requests: '3', cost_usd: '0.123' },
    ]);
  });
});
