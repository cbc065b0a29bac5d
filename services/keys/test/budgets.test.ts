import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { create } from '@bufbuild/protobuf';
import { type Timestamp, timestampDate, ValueSchema } from '@bufbuild/protobuf/wkt';
import type { ConnectError } from '@connectrpc/connect';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { UsageRecordedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { budgetPassedBy, firstReached, parseSpendLimits } from '@switchboard/keys/budgets';
import { CapLeases, type LeaseRequest } from '@switchboard/keys/cap-leases';
import { RateLeases } from '@switchboard/keys/rate-leases';
import { Spend } from '@switchboard/keys/spend';
import { SpendLimits } from '@switchboard/keys/spend-limits';
import { budgetStatuses, setKeySpendLimits } from '@switchboard/keys/store/budget-spend';
import { lockKeyBudget } from '@switchboard/keys/store/cap-leases';
import { insertKey, keyStateChannel } from '@switchboard/keys/store/keys';
import { insertReservation } from '@switchboard/keys/store/reservations';
import { generateFullKey, hashKey, hintOf } from '@switchboard/runtime/api-key-format';
import { AuditTrail } from '@switchboard/runtime/audit';
import type { WorkspaceCaller } from '@switchboard/runtime/caller';
import { decodeEvent, parseEventEnvelope } from '@switchboard/runtime/consumer';
import { createDb, type Knex, migrate } from '@switchboard/runtime/db';
import { eventDataToJson, eventTypeOf } from '@switchboard/runtime/event-data';
import { newId } from '@switchboard/runtime/ids';
import { createLogger } from '@switchboard/runtime/log';
import { Money } from '@switchboard/runtime/money';
import { buildEventPayload, recordEvent } from '@switchboard/runtime/outbox';
import { PgNotifier } from '@switchboard/runtime/pg-notifications';
import { requireEnv } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

/**
 * Periodic budgets, workspace budgets and rate limits in the keys service's domain modules, on a
 * schema of their own, with a clock the test moves (docs/api/keys.md#periodic-budgets,
 * docs/money-path.md#leases): periods reset at their UTC boundary, leases never pass a limit
 * however many holders ask at once, and usage settles them.
 */

const schema = `keys_budgets_${randomBytes(3).toString('hex')}`;
const log = createLogger('keys-budgets-test', 'silent');
const migrations = path.join(fileURLToPath(new URL('../dist/migrations/', import.meta.url)));
let db: Knex;
let notifier: PgNotifier;
let now: Date;
const clock = () => now;
const events: Array<{ type: string; data: Record<string, unknown> }> = [];
let spend: Spend;
let capLeases: CapLeases;
let rateLeases: RateLeases;

beforeAll(async () => {
  db = createDb(requireEnv('DATABASE_URL'), schema, 8);
  await migrate(db, schema, migrations);
  notifier = new PgNotifier({ db, channel: keyStateChannel, log });
  spend = new Spend({
    log,
    notifier,
    recordEvent: async (trx, eventSchema, event) => {
      events.push({ type: eventTypeOf(eventSchema), data: eventDataToJson(eventSchema, event.data) });
      return recordEvent(trx, eventSchema, event, { producer: 'keys', subjectPrefix: 'test' });
    },
  });
  capLeases = new CapLeases({ db, leaseTtlMs: 30_000, clock });
  rateLeases = new RateLeases({ db, leaseTtlMs: 30_000, clock });
});

beforeEach(() => {
  events.length = 0;
});

afterAll(async () => {
  await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  await db.destroy();
});

const amount = (value: string) => create(ValueSchema, { kind: { case: 'stringValue', value } });
const limits = (...pairs: Array<[string, string]>) => parseSpendLimits(pairs.map(([period, value]) => ({ period, amountUsd: amount(value) })));

async function newKey(options: { cap?: string; limits?: Array<[string, string]>; workspaceId?: string; rate?: Record<string, number> } = {}) {
  const fullKey = generateFullKey();
  const id = newId('key');
  const workspaceId = options.workspaceId ?? newId('org');
  await insertKey(db, {
    id,
    workspaceId,
    name: 'k',
    keyHash: hashKey(fullKey),
    hint: hintOf(fullKey),
    capUsd: options.cap ?? null,
    routingPolicy: 'any',
    createdBy: newId('usr'),
  });
  if (options.limits) await db.transaction((trx) => setKeySpendLimits(trx, id, limits(...options.limits!)));
  if (options.rate) await db('api_keys').where({ id }).update(options.rate);
  return { id, workspaceId };
}

/** A billing.usage.recorded event as the consumer hands it over. */
function usage(key: { id: string; workspaceId: string }, cost: string, at: Date, extra: Record<string, string> = {}) {
  const payload = buildEventPayload(
    newId('evt'),
    {
      type: 'billing.usage.recorded',
      workspaceId: key.workspaceId,
      data: { key_id: key.id, workspace_id: key.workspaceId, cost_usd: cost, occurred_at: at.toISOString(), balance_usd: '10', ...extra },
    },
    'billing',
    at,
  );
  return decodeEvent(UsageRecordedSchema, parseEventEnvelope(JSON.stringify(payload)));
}

const record = (...batch: ReturnType<typeof usage>[]) => db.transaction((trx) => spend.usageRecorded(trx, batch));

const ask = (subject: { keyId?: string; workspaceId?: string }, want: string, min: string, extra: Partial<LeaseRequest> = {}) =>
  capLeases.lease({
    keyId: subject.keyId ?? '',
    workspaceId: subject.workspaceId,
    leaseId: '',
    holder: 'replica-1',
    usedUsd: '0',
    wantUsd: want,
    minUsd: min,
    ...extra,
  });

const iso = (at: unknown) => (at ? timestampDate(at as Timestamp).toISOString() : undefined);

describe('periodic budgets of a key', () => {
  it('a daily limit resets at 00:00 UTC: refused at 23:59:50, granted again at 00:00:01', async () => {
    now = new Date('2026-11-25T23:59:50Z');
    const key = await newKey({ limits: [['day', '1.00']] });
    const lease = await ask({ keyId: key.id }, '1', '1');
    expect(lease).toMatchObject({ grantedUsd: '1', scope: 'key', period: 'day', capUsd: '1.00', spendUsd: '0' });
    // The lease ends with the day, not half a LEASE_TTL (15 s) later.
    expect(iso(lease.expiresAt)).toBe('2026-11-26T00:00:00.000Z');
    await record(usage(key, '1.00', new Date('2026-11-25T23:59:52Z'), { cap_lease_id: lease.leaseId! }));
    now = new Date('2026-11-25T23:59:55Z');
    const refused = await ask({ keyId: key.id }, '0.01', '0.01');
    expect(refused).toMatchObject({ leaseId: '', grantedUsd: '0', scope: 'key', period: 'day', capUsd: '1.00', spendUsd: '1' });
    expect(iso(refused.resetsAt)).toBe('2026-11-26T00:00:00.000Z');
    expect(firstReached('key', await budgetStatuses(db, { keyId: key.id, budgetId: key.id }, null, now))).toEqual({
      scope: 'key',
      period: 'day',
      capUsd: '1.00',
      spendUsd: '1',
      resetsAt: new Date('2026-11-26T00:00:00Z'),
    });

    now = new Date('2026-11-26T00:00:01Z');
    expect(await ask({ keyId: key.id }, '1', '1')).toMatchObject({ grantedUsd: '1', spendUsd: '0' });
    expect(firstReached('key', await budgetStatuses(db, { keyId: key.id, budgetId: key.id }, null, now))).toBeUndefined();
    expect(await budgetStatuses(db, { keyId: key.id, budgetId: key.id }, null, now)).toEqual([
      { period: 'day', amountUsd: '1.00', spendUsd: '0', remainingUsd: '1', resetsAt: new Date('2026-11-27T00:00:00Z') },
    ]);
  });

  it('weeks start on Monday (UTC); total never resets', async () => {
    now = new Date('2026-11-30T08:00:00Z'); // a Monday
    const key = await newKey({
      limits: [
        ['total', '50'],
        ['week', '10'],
        ['month', '100'],
      ],
    });
    await record(usage(key, '3', new Date('2026-11-29T23:59:59Z')), usage(key, '2', new Date('2026-11-30T00:00:00Z')));
    expect(await budgetStatuses(db, { keyId: key.id, budgetId: key.id }, '100', now)).toEqual([
      { period: 'week', amountUsd: '10', spendUsd: '2', remainingUsd: '8', resetsAt: new Date('2026-12-07T00:00:00Z') },
      { period: 'month', amountUsd: '100', spendUsd: '5', remainingUsd: '95', resetsAt: new Date('2026-12-01T00:00:00Z') },
      { period: 'total', amountUsd: '50', spendUsd: '5', remainingUsd: '45', resetsAt: null },
    ]);
    const sunday = new Date('2026-11-29T12:00:00Z');
    expect((await budgetStatuses(db, { keyId: key.id, budgetId: key.id }, '100', sunday))[0]).toMatchObject({
      spendUsd: '3',
      resetsAt: new Date('2026-11-30T00:00:00Z'),
    });
  });

  it('lease under the limit leaving the least room, and answer its facts', async () => {
    now = new Date('2026-11-25T12:00:00Z');
    const key = await newKey({
      limits: [
        ['day', '5'],
        ['total', '3'],
        ['month', '2.00'],
      ],
    });
    await record(usage(key, '1.5', now));
    // day: 3.5 left, month: 0.5, total: 1.5; the month binds.
    const lease = await ask({ keyId: key.id }, '1', '0.1');
    expect(lease).toMatchObject({ grantedUsd: '0.5', scope: 'key', period: 'month', capUsd: '2.00', spendUsd: '1.5' });
    expect(iso(lease.resetsAt)).toBe('2026-12-01T00:00:00.000Z');
    const refused = await ask({ keyId: key.id }, '0.1', '0.1');
    expect(refused).toMatchObject({ leaseId: '', period: 'month' });
    // Total binds once the month is raised; a total has no reset.
    await db.transaction((trx) => setKeySpendLimits(trx, key.id, limits(['month', '100'], ['total', '3'])));
    const total = await ask({ keyId: key.id }, '5', '0.1');
    // 1 is left of the total beside the month's lease: half of it, shared with that lease.
    expect(total).toMatchObject({ grantedUsd: '0.5', period: 'total', capUsd: '3', spendUsd: '1.5' });
    expect(total.resetsAt).toBeUndefined();
  });

  it('never grant two holders more than a limit between them, 64 asks at once', async () => {
    now = new Date('2026-11-25T12:00:00Z');
    const key = await newKey({ limits: [['day', '0.130']] });
    const answers = await Promise.all(Array.from({ length: 64 }, (_, i) => ask({ keyId: key.id }, '0.013', '0.013', { holder: `replica-${i % 2}` })));
    expect(answers.filter((answer) => answer.leaseId !== '')).toHaveLength(10);
    const granted = answers.reduce((sum, answer) => sum.plus(answer.grantedUsd ?? '0'), new Money(0));
    expect(granted.eq('0.13')).toBe(true);
  });

  it('share one budget between a key and the key rotated from it', async () => {
    now = new Date('2026-11-25T12:00:00Z');
    const old = await newKey({ cap: '1' });
    const rotated = await newKey({ cap: '1', workspaceId: old.workspaceId });
    await db('api_keys').where({ id: rotated.id }).update({ budget_id: old.id, rotated_from: old.id });
    await record(usage(old, '0.25', now), usage(rotated, '0.5', now));
    expect((await budgetStatuses(db, { keyId: rotated.id, budgetId: old.id }, '1', now))[0]).toMatchObject({ spendUsd: '0.75' });
    expect(await ask({ keyId: rotated.id }, '1', '0.1')).toMatchObject({ grantedUsd: '0.25', spendUsd: '0.75' });
    expect((await ask({ keyId: old.id }, '0.1', '0.1')).leaseId).toBe('');
  });

  it('need no lease without limits, and refuse revoked, expired and unknown keys', async () => {
    now = new Date('2026-11-25T12:00:00Z');
    const key = await newKey();
    const free = await ask({ keyId: key.id }, '1', '0.1');
    expect(free).toMatchObject({ leaseId: '', reason: '', spendUsd: '0', scope: 'key' });
    expect(free.capUsd).toBeUndefined();
    await db('api_keys')
      .where({ id: key.id })
      .update({ expires_at: new Date('2026-11-25T11:00:00Z') });
    expect(await ask({ keyId: key.id }, '1', '0.1')).toMatchObject({ reason: 'expired' });
    expect(await ask({ keyId: newId('key') }, '1', '0.1')).toMatchObject({ reason: 'unknown' });
  });
});

describe('AuthorizeKey reservations against periodic budgets', () => {
  it('count the leases and open reservations of the budget against every limit', async () => {
    now = new Date();
    const key = await newKey({
      limits: [
        ['day', '1'],
        ['total', '10'],
      ],
    });
    expect((await ask({ keyId: key.id }, '0.5', '0.5')).grantedUsd).toBe('0.5');
    const reserve = (amountUsd: string) =>
      db.transaction(async (trx) => {
        const locked = (await lockKeyBudget(trx, key.id))!;
        const passed = await budgetPassedBy(trx, { keyId: key.id, budgetId: locked.budget_id, monthlyCapUsd: locked.cap }, amountUsd, now);
        if (!passed) await insertReservation(trx, { id: newId('rsv'), keyId: key.id, amountUsd, ttlSeconds: 60 });
        return passed;
      });
    expect(await reserve('0.6')).toMatchObject({ scope: 'key', period: 'day', capUsd: '1', spendUsd: '0.5' });
    expect(await reserve('0.4')).toBeUndefined();
    // The reservation holds its room: 0.1 is left for a lease.
    expect(await ask({ keyId: key.id }, '1', '0.1')).toMatchObject({ grantedUsd: '0.1', period: 'day' });
    expect(await reserve('0.01')).toMatchObject({ period: 'day', spendUsd: '1' });
  });
});

describe('spend alerts per period', () => {
  it('alert each threshold of each limit once per period, with the period and its start', async () => {
    now = new Date('2026-11-25T12:00:00Z');
    const key = await newKey({
      limits: [
        ['day', '2'],
        ['month', '10'],
      ],
    });
    await db('api_keys')
      .where({ id: key.id })
      .update({ alert_webhook_url: 'https://a.example.com', alert_threshold_pct: 50, alert_thresholds_pct: [50, 100], alert_signing_secret_encrypted: 'x' });
    await record(usage(key, '1', now));
    await record(usage(key, '1', now), usage(key, '0.5', now));
    await record(usage(key, '3', new Date('2026-11-26T01:00:00Z')));
    const alerts = events.filter((e) => e.type === 'key.spend_alert').map((e) => [e.data.period, e.data.period_start, e.data.threshold_pct, e.data.spend_usd]);
    expect(alerts).toEqual([
      ['day', '2026-11-25', 50, '1'],
      ['day', '2026-11-25', 100, '2.5'],
      ['day', '2026-11-26', 50, '3'],
      ['day', '2026-11-26', 100, '3'],
      ['month', '2026-11-01', 50, '5.5'],
    ]);
    const first = events.find((e) => e.type === 'key.spend_alert')!;
    expect(first.data).toMatchObject({ key_id: key.id, month: '2026-11', cap_usd: '2', alert_url: 'https://a.example.com' });
    // Reaching the day's limit each day, once per batch.
    expect(events.filter((e) => e.type === 'key.updated').map((e) => e.data.change)).toEqual(['cap_reached', 'cap_reached']);
  });
});

describe('workspace budgets', () => {
  const caller = (workspaceId: string): WorkspaceCaller =>
    ({
      workspaceId,
      userId: newId('usr'),
      principalType: 'user',
      role: 'owner',
      ctx: { values: new Map() },
      requestId: newId('req'),
    }) as unknown as WorkspaceCaller;

  it('lease the workspace limits over the spend of all its keys, for a second at most, settled by usage', async () => {
    now = new Date('2026-11-25T12:00:00Z');
    const workspaceId = newId('org');
    const a = await newKey({ workspaceId });
    const b = await newKey({ workspaceId });
    const spendLimits = new SpendLimits({
      db,
      clock,
      audit: new AuditTrail({
        log,
        db,
        recordEvent: (trx, eventSchema, event) => recordEvent(trx, eventSchema, event, { producer: 'keys', subjectPrefix: 'test' }),
      }),
    });
    expect(await ask({ workspaceId }, '1', '0.1')).toMatchObject({ leaseId: '', scope: 'workspace' });
    const set = await spendLimits.update(caller(workspaceId), [
      { period: 'month', amountUsd: amount('10.00') },
      { period: 'day', amountUsd: amount('1') },
    ]);
    expect(set.spendLimits?.map((s) => [s.period, s.amountUsd, s.spendUsd, s.remainingUsd])).toEqual([
      ['day', '1', '0', '1'],
      ['month', '10.00', '0', '10'],
    ]);
    const answers = await Promise.all(Array.from({ length: 32 }, (_, i) => ask({ workspaceId }, '0.1', '0.1', { holder: `replica-${i % 2}` })));
    const granted = answers.filter((answer) => answer.leaseId !== '');
    expect(granted).toHaveLength(10);
    expect(granted[0]).toMatchObject({ scope: 'workspace', period: 'day', capUsd: '1' });
    expect(granted[0].leaseId).toMatch(/^wsl_/);
    expect(iso(granted[0].expiresAt)).toBe('2026-11-25T12:00:01.000Z');
    await record(usage(a, '0.05', now, { workspace_lease_id: granted[0].leaseId! }), usage(b, '0.1', now, { workspace_lease_id: granted[1].leaseId! }));
    // 0.15 spent, the two leases hold 0.05 and 0 more, 8 others 0.8: nothing is left until one is given back.
    expect(await ask({ workspaceId }, '0.1', '0.05')).toMatchObject({ leaseId: '', spendUsd: '0.15' });
    await capLeases.release(granted[2].leaseId!, '0');
    // 0.1 is left, shared with the 8 leases holding some: at least the least asked.
    expect(await ask({ workspaceId }, '0.1', '0.05')).toMatchObject({ grantedUsd: '0.05', spendUsd: '0.15' });
    expect((await spendLimits.get(caller(workspaceId))).spendLimits?.map((s) => s.spendUsd)).toEqual(['0.15', '0.15']);
    expect(firstReached('workspace', await budgetStatuses(db, { workspaceId }, null, now))).toBeUndefined();
    await record(usage(a, '1', now));
    expect(firstReached('workspace', await budgetStatuses(db, { workspaceId }, null, now))).toMatchObject({
      scope: 'workspace',
      period: 'day',
      capUsd: '1',
      spendUsd: '1.15',
    });
    // Past their second, the leases stop counting half a TTL later; removing the limits needs no lease.
    await spendLimits.update(caller(workspaceId), []);
    expect(await ask({ workspaceId }, '1', '0.1')).toMatchObject({ leaseId: '', scope: 'workspace' });
  });
});

describe('rate-limit leases', () => {
  const rate = (keyId: string, dimension: string, want: string, min: string, extra: Record<string, string> = {}) =>
    rateLeases.lease({ keyId, dimension, leaseId: '', holder: 'replica-1', used: '0', want, min, ...extra });

  it('grant exactly requests_per_minute in a minute to two holders asking 50 times each at once; the next minute starts empty', async () => {
    now = new Date('2026-11-25T12:00:10Z');
    const key = await newKey({ rate: { requests_per_minute: 20 } });
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => rate(key.id, 'requests', '1', '1', { holder: `replica-${i % 2}` })));
    const granted = answers.filter((answer) => answer.leaseId !== '');
    expect(granted).toHaveLength(20);
    expect(granted.reduce((sum, answer) => sum + Number(answer.granted), 0)).toBe(20);
    const refused = answers.find((answer) => answer.leaseId === '')!;
    expect(refused).toMatchObject({ granted: '0', limit: 20n, remaining: 0n, reason: '' });
    expect(iso(refused.resetsAt)).toBe('2026-11-25T12:01:00.000Z');
    expect(iso(granted[0].expiresAt)).toBe('2026-11-25T12:01:00.000Z');
    // A renewal of a lease of a past minute is a new lease of this one.
    now = new Date('2026-11-25T12:01:00Z');
    const next = await rate(key.id, 'requests', '5', '1', { leaseId: granted[0].leaseId!, used: '1' });
    expect(next.leaseId).not.toBe(granted[0].leaseId);
    expect(next).toMatchObject({ granted: '5', remaining: 15n });
  });

  it('share what is left fairly, and renew with what was used', async () => {
    now = new Date('2026-11-25T12:00:10Z');
    const key = await newKey({ rate: { tokens_per_minute: 1000 } });
    const a = await rate(key.id, 'tokens', '600', '100');
    expect(a).toMatchObject({ granted: '600', remaining: 400n });
    const b = await rate(key.id, 'tokens', '600', '100');
    expect(b).toMatchObject({ granted: '200', remaining: 200n });
    // a used 500: it keeps them, and gets half of the 300 left beyond b's and its own.
    const renewed = await rate(key.id, 'tokens', '600', '10', { leaseId: a.leaseId!, used: '500' });
    expect(renewed).toMatchObject({ leaseId: a.leaseId, granted: '650', remaining: 150n });
    await rateLeases.release(b.leaseId!, '50');
    // 300 left, shared with two leases: 100.
    expect(await rate(key.id, 'tokens', '1000', '1')).toMatchObject({ granted: '100', remaining: 200n });
  });

  it('never hold more concurrency slots than max_concurrent; released slots return at once', async () => {
    now = new Date('2026-11-25T12:00:10Z');
    const key = await newKey({ rate: { max_concurrent: 3 } });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => rate(key.id, 'concurrency', '1', '1', { holder: `replica-${i % 2}` })));
    const granted = answers.filter((answer) => answer.leaseId !== '');
    expect(granted).toHaveLength(3);
    expect(iso(granted[0].expiresAt)).toBe('2026-11-25T12:00:40.000Z');
    expect(granted[0].resetsAt).toBeUndefined();
    // A renewal reports the slots in use: 1 of 1, and none is free.
    expect(await rate(key.id, 'concurrency', '1', '1', { leaseId: granted[0].leaseId!, used: '1' })).toMatchObject({ granted: '1', remaining: 0n });
    await rateLeases.release(granted[1].leaseId!, '0');
    expect((await rate(key.id, 'concurrency', '1', '1')).granted).toBe('1');
    expect((await rate(key.id, 'concurrency', '1', '1')).leaseId).toBe('');
    // A holder that lost touch keeps its slots one TTL past its deadline, then they return.
    now = new Date('2026-11-25T12:01:11Z');
    expect(await rate(key.id, 'concurrency', '3', '1')).toMatchObject({ granted: '3', remaining: 0n });
  });

  it('count a rotated key against its budget, need no lease without a limit, and name bad fields', async () => {
    now = new Date('2026-11-25T12:00:10Z');
    const old = await newKey({ rate: { requests_per_minute: 2 } });
    const rotated = await newKey({ workspaceId: old.workspaceId, rate: { requests_per_minute: 2 } });
    await db('api_keys').where({ id: rotated.id }).update({ budget_id: old.id });
    expect((await rate(old.id, 'requests', '1', '1')).granted).toBe('1');
    expect((await rate(rotated.id, 'requests', '1', '1')).granted).toBe('1');
    expect((await rate(rotated.id, 'requests', '1', '1')).leaseId).toBe('');
    const free = await rate(old.id, 'tokens', '100', '1');
    expect(free).toMatchObject({ leaseId: '', granted: '0' });
    expect(free.limit).toBeUndefined();
    const fieldOf = async (promise: Promise<unknown>) =>
      promise.then(
        () => 'accepted',
        (err) => (err as ConnectError).findDetails(ErrorDetailSchema)[0]?.field,
      );
    expect(await fieldOf(rate('', 'requests', '1', '1'))).toBe('key_id');
    expect(await fieldOf(rate(old.id, 'minutes', '1', '1'))).toBe('dimension');
    expect(await fieldOf(rate(old.id, 'requests', '0', '0'))).toBe('want');
    expect(await fieldOf(rate(old.id, 'requests', '1.5', '0'))).toBe('want');
    expect(await fieldOf(rate(old.id, 'requests', '1', '2'))).toBe('min');
    expect(await fieldOf(rate(old.id, 'requests', '1', '1', { used: '-1' }))).toBe('used');
    expect(await fieldOf(rateLeases.release('', '0'))).toBe('lease_id');
  });
});

describe('spend limit input', () => {
  const fieldOf = (fn: () => unknown) => {
    try {
      fn();
      return 'accepted';
    } catch (err) {
      return (err as ConnectError).findDetails(ErrorDetailSchema)[0]?.field;
    }
  };

  it('one limit per period, a plain decimal string each, named by index', () => {
    expect(limits(['total', '0'], ['day', '5.00'])).toEqual([
      { period: 'day', amountUsd: '5.00' },
      { period: 'total', amountUsd: '0' },
    ]);
    const number = create(ValueSchema, { kind: { case: 'numberValue', value: 5 } });
    expect(
      fieldOf(() =>
        parseSpendLimits([
          { period: 'day', amountUsd: amount('1') },
          { period: 'week', amountUsd: number },
        ]),
      ),
    ).toBe('spend_limits[1].amount_usd');
    expect(fieldOf(() => parseSpendLimits([{ period: 'day' }]))).toBe('spend_limits[0].amount_usd');
    expect(fieldOf(() => limits(['day', '1e3']))).toBe('spend_limits[0].amount_usd');
    expect(fieldOf(() => limits(['day', '-1']))).toBe('spend_limits[0].amount_usd');
    expect(fieldOf(() => limits(['hour', '1']))).toBe('spend_limits[0].period');
    expect(fieldOf(() => limits(['day', '1'], ['day', '2']))).toBe('spend_limits[1].period');
    expect(fieldOf(() => limits(['day', '1'], ['week', '1'], ['month', '1'], ['total', '1'], ['day', '1']))).toBe('spend_limits');
  });
});
