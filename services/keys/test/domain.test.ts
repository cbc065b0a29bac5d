import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ConnectError } from '@connectrpc/connect';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { BalanceChangedSchema, UsageRecordedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { CapLeases } from '@switchboard/keys/cap-leases';
import { parseKeyName, parseSpendCap } from '@switchboard/keys/key-input';
import { KeyStateFeed } from '@switchboard/keys/key-state-feed';
import { KeyStates } from '@switchboard/keys/key-states';
import { monthEnd, monthOf } from '@switchboard/keys/months';
import { Spend } from '@switchboard/keys/spend';
import { findBalance } from '@switchboard/keys/store/balances';
import { insertKey, keyStateChannel, revokeKeys } from '@switchboard/keys/store/keys';
import { generateFullKey, hashKey, hintOf, isWellFormedKey } from '@switchboard/runtime/api-key-format';
import { decodeEvent, parseEventEnvelope } from '@switchboard/runtime/consumer';
import { createDb, type Knex, migrate } from '@switchboard/runtime/db';
import { eventDataToJson, eventTypeOf } from '@switchboard/runtime/event-data';
import { newId } from '@switchboard/runtime/ids';
import { createLogger } from '@switchboard/runtime/log';
import { buildEventPayload, recordEvent } from '@switchboard/runtime/outbox';
import { PgNotifier } from '@switchboard/runtime/pg-notifications';
import { eventually, requireEnv } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The keys service's domain modules on their own, against a migrated schema of their own: the
 * key format, the input rules, the key states kept fresh by NOTIFY, and spend with its alerts.
 */

const schema = `keys_domain_${randomBytes(3).toString('hex')}`;
const log = createLogger('keys-domain-test', 'silent');
const migrations = path.join(fileURLToPath(new URL('../dist/migrations/', import.meta.url)));
let db: Knex;
let notifier: PgNotifier;

beforeAll(async () => {
  db = createDb(requireEnv('DATABASE_URL'), schema, 4);
  await migrate(db, schema, migrations);
  notifier = new PgNotifier({ db, channel: keyStateChannel, log });
});

afterAll(async () => {
  await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  await db.destroy();
});

async function newKey(cap: string | null = null, workspaceId = newId('org')) {
  const fullKey = generateFullKey();
  const id = newId('key');
  await insertKey(db, {
    id,
    workspaceId,
    name: 'k',
    keyHash: hashKey(fullKey),
    hint: hintOf(fullKey),
    capUsd: cap,
    routingPolicy: 'any',
    createdBy: newId('usr'),
  });
  return { id, fullKey, workspaceId };
}

describe('the key format', () => {
  it('is sb_ + 43 base62 + a 6-character checksum that catches every single-character change', () => {
    const keys = new Set(Array.from({ length: 1000 }, generateFullKey));
    expect(keys.size).toBe(1000);
    const key = [...keys][0];
    expect(key).toMatch(/^sb_[0-9A-Za-z]{49}$/);
    expect(isWellFormedKey(key)).toBe(true);
    for (let i = 3; i < key.length; i++) {
      const other = key[i] === 'x' ? 'y' : 'x';
      expect(isWellFormedKey(key.slice(0, i) + other + key.slice(i + 1)), `position ${i}`).toBe(false);
    }
    expect(isWellFormedKey(`${key}0`)).toBe(false);
    expect(isWellFormedKey(key.replace('sb_', 'sk_'))).toBe(false);
    expect(hintOf(key)).toBe(`sb_…${key.slice(-4)}`);
    expect(hashKey(key)).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('input rules', () => {
  /** The field a refusal names (a 400 of docs/conventions.md#errors), or 'accepted'. */
  const fieldOf = (fn: () => unknown) => {
    try {
      fn();
      return 'accepted';
    } catch (err) {
      return (err as ConnectError).findDetails(ErrorDetailSchema)[0]?.field;
    }
  };

  it('caps: plain decimal notation, kept as given, bounded', () => {
    for (const cap of ['0', '0.1', '0.10', '12.50', '999999999999999', '0.000000000001']) expect(parseSpendCap(cap)).toBe(cap);
    for (const cap of ['abc', '-5', '', '1e3', '.5', '5.', '+5', ' 5', '1_000', '1000000000000000', '0.0000000000001', '٣']) {
      expect(
        fieldOf(() => parseSpendCap(cap)),
        cap,
      ).toBe('monthly_spend_cap_usd');
    }
  });

  it('names: 1..100 code points after trimming (astral characters count once)', () => {
    expect(parseKeyName('  a  ')).toBe('a');
    expect(parseKeyName('😀'.repeat(100))).toHaveLength(200);
    for (const name of ['', ' \t\n', '😀'.repeat(101)])
      expect(
        fieldOf(() => parseKeyName(name)),
        name,
      ).toBe('name');
  });

  it('months are UTC calendar months', () => {
    expect(monthOf(new Date('2026-01-31T23:59:59.999Z'))).toBe('2026-01-01');
    expect(monthOf(new Date('2026-02-01T00:00:00Z'))).toBe('2026-02-01');
    expect(monthEnd(new Date('2026-12-15T10:00:00Z')).toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });
});

describe('key states', () => {
  it('answers from memory and hears every committed change, on any connection, within milliseconds', async () => {
    const states = new KeyStates({ db, log });
    try {
      const key = await newKey('5');
      await eventually(async () => (await states.byHash(hashKey(key.fullKey)))?.status === 'active', 'the key to load');
      const state = await states.byHash(hashKey(key.fullKey));
      expect(state).toMatchObject({ keyId: key.id, capUsd: '5', spendUsd: '0', capReached: false });
      expect(await states.byHash(hashKey(generateFullKey()))).toBeUndefined();

      await db.transaction(async (trx) => {
        await revokeKeys(trx, { keyId: key.id }, { by: null, reason: 'revoked' });
        notifier.afterCommit(trx, [`key:${key.id}`]);
      });
      await eventually(async () => (await states.byHash(hashKey(key.fullKey)))?.status === 'revoked', 'the revocation to be heard', 1000, 5);
    } finally {
      await states.stop();
    }
  });

  it('starts a new month at zero spend, without any reset', async () => {
    let now = new Date('2026-03-31T23:59:00Z');
    const states = new KeyStates({ db, log, clock: () => now });
    const spend = new Spend({
      log,
      notifier,
      recordEvent: (trx, schema, event) => recordEvent(trx, schema, event, { producer: 'keys', subjectPrefix: 'test' }),
    });
    try {
      const key = await newKey('1.00');
      await db.transaction((trx) => spend.usageRecorded(trx, [usage(key, '1.00', now)]));
      await eventually(async () => (await states.byHash(hashKey(key.fullKey)))?.capReached, 'the cap to be reached');
      now = new Date('2026-04-01T00:00:01Z');
      expect(await states.byHash(hashKey(key.fullKey))).toMatchObject({ month: '2026-04-01', spendUsd: '0', capReached: false });
    } finally {
      await states.stop();
    }
  });
});

describe('key state versions', () => {
  it('are taken at commit, so a change committed late is never below a version a replica already read', async () => {
    const feed = new KeyStateFeed({ db });
    const early = await newKey();
    const late = await newKey();
    let head = 0n;
    for (let page = await feed.list(head, 5000); ; page = await feed.list(head, 5000)) {
      head = page.version;
      if (!page.hasMore) break;
    }
    // `early` changes first but commits last.
    await db.transaction(async (trx) => {
      await trx('api_keys').where({ id: early.id }).update({ routing_policy: 'cn-only' });
      await db('api_keys').where({ id: late.id }).update({ routing_policy: 'overseas-only' });
      const seen = await feed.list(head, 10);
      expect(seen.states.map((state) => state.keyId)).toEqual([late.id]);
    });
    const after = await feed.list(head, 10);
    expect(after.states.map((state) => [state.keyId, state.routingPolicy])).toEqual([
      [late.id, 'overseas-only'],
      [early.id, 'cn-only'],
    ]);
    await db('api_keys').where({ id: late.id }).update({ last_used_at: db.fn.now() });
    expect((await feed.list(after.version, 10)).states).toEqual([]); // a use is no change of standing
  });
});

/** A billing.usage.recorded event as the consumer hands it over. */
function usage(key: { id: string; workspaceId: string }, cost: string, at: Date, extra: Record<string, string> = {}) {
  const payload = buildEventPayload(
    newId('evt'),
    {
      type: 'billing.usage.recorded',
      workspaceId: key.workspaceId,
      data: { key_id: key.id, cost_usd: cost, occurred_at: at.toISOString(), balance_usd: '10', ...extra },
    },
    'billing',
    at,
  );
  return decodeEvent(UsageRecordedSchema, parseEventEnvelope(JSON.stringify(payload)));
}

describe('spend alerts', () => {
  it('fire once per threshold per month, a batch at a time; a 100% threshold is the cap alert itself; usage of another month counts there', async () => {
    const events: Array<{ type: string; data: Record<string, unknown> }> = [];
    const spend = new Spend({
      log,
      notifier,
      recordEvent: async (trx, schema, event) => {
        events.push({ type: eventTypeOf(schema), data: eventDataToJson(schema, event.data) });
        return recordEvent(trx, schema, event, { producer: 'keys', subjectPrefix: 'test' });
      },
    });
    const key = await newKey('2');
    await db('api_keys')
      .where({ id: key.id })
      .update({ alert_webhook_url: 'https://a.example.com', alert_threshold_pct: 100, alert_thresholds_pct: [100], alert_signing_secret_encrypted: 'x' });
    const at = new Date();
    const lastMonth = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() - 1, 10));
    await db.transaction((trx) => spend.usageRecorded(trx, [usage(key, '1.5', at), usage(key, '7', lastMonth), usage(key, '0.5', at)]));
    await db.transaction((trx) => spend.usageRecorded(trx, [usage(key, '0.5', at)]));
    const alerts = events.filter((e) => e.type === 'key.spend_alert').map((e) => [e.data.month, e.data.threshold_pct, e.data.spend_usd]);
    expect(alerts.sort()).toEqual(
      [
        [monthOf(at).slice(0, 7), 100, '2'],
        [monthOf(lastMonth).slice(0, 7), 100, '7'],
      ].sort(),
    );
    expect(events.filter((e) => e.type === 'key.updated').map((e) => e.data.change)).toEqual(['cap_reached', 'cap_reached']);
    const rows = await db('key_monthly_spend').where({ key_id: key.id }).orderBy('month').select(db.raw('spend_usd::text AS spend'), 'usage_count');
    expect(rows.map((r: { spend: string; usage_count: string }) => [r.spend, Number(r.usage_count)])).toEqual([
      ['7', 1],
      ['2.5', 3],
    ]);
  });
});

describe('cap leases and usage', () => {
  it('move the room of settled usage from the lease to the spend in one transaction', async () => {
    const leases = new CapLeases({ db, leaseTtlMs: 30_000 });
    const spend = new Spend({
      log,
      notifier,
      recordEvent: (trx, schema, event) => recordEvent(trx, schema, event, { producer: 'keys', subjectPrefix: 'test' }),
    });
    const key = await newKey('1');
    const ask = (want: string, min: string, leaseId = '', usedUsd = '0') =>
      leases.lease({ keyId: key.id, leaseId, holder: 'replica-1', usedUsd, wantUsd: want, minUsd: min });
    const a = await ask('0.5', '0.5');
    expect(a.grantedUsd).toBe('0.5');
    const at = new Date();
    await db.transaction((trx) =>
      spend.usageRecorded(trx, [usage(key, '0.3', at, { cap_lease_id: a.leaseId! }), usage(key, '0.1', at, { cap_lease_id: a.leaseId! })]),
    );
    const row = await db('cap_leases').where({ id: a.leaseId }).first(db.raw('settled_usd::text AS settled'));
    expect(row.settled).toBe('0.4');
    // Spent 0.4, lease a still holds 0.1: 0.5 is left, no more.
    const b = await ask('0.5', '0.5');
    expect(b).toMatchObject({ grantedUsd: '0.5', spendUsd: '0.4' });
    expect((await ask('0.01', '0.01')).leaseId).toBe('');
    // A renewal of a, its use all settled, holds only its new headroom: of the 0.1 left, 0.4 + 0.1.
    const renewed = await ask('0.1', '0.1', a.leaseId, '0.4');
    expect(renewed).toMatchObject({ leaseId: a.leaseId, grantedUsd: '0.5' });
    expect((await ask('0.01', '0.01')).leaseId).toBe('');
  });
});

describe('balances', () => {
  it('keep the newest balance by billing version, whatever the arrival order or the clocks', async () => {
    const spend = new Spend({
      log,
      notifier,
      recordEvent: (trx, schema, event) => recordEvent(trx, schema, event, { producer: 'keys', subjectPrefix: 'test' }),
    });
    const workspaceId = newId('org');
    const report = (balance: string, version: string, at: Date) =>
      decodeEvent(
        BalanceChangedSchema,
        parseEventEnvelope(
          JSON.stringify(
            buildEventPayload(
              newId('evt'),
              { type: 'billing.balance.changed', workspaceId, data: { workspace_id: workspaceId, balance_usd: balance, balance_version: version } },
              'billing',
              at,
            ),
          ),
        ),
      );
    // The credit (version 2) is applied first; the debit before it (version 1) arrives later, with a later clock.
    await db.transaction((trx) => spend.balanceChanged(trx, report('5.00', '2', new Date('2026-01-01T00:00:00Z'))));
    await db.transaction((trx) => spend.balanceChanged(trx, report('-0.01', '1', new Date('2026-01-01T00:00:01Z'))));
    expect(await findBalance(db, workspaceId)).toBe('5.00');
    await db.transaction((trx) => spend.balanceChanged(trx, report('4.50', '3', new Date('2025-12-31T00:00:00Z'))));
    expect(await findBalance(db, workspaceId)).toBe('4.50');
    // A batch of usage reports its balances out of order too: the newest of the batch is kept.
    const key = { id: newId('key'), workspaceId };
    const at = new Date();
    await db.transaction((trx) =>
      spend.usageRecorded(trx, [
        usage(key, '0.5', at, { balance_usd: '3.00', balance_version: '5' }),
        usage(key, '0.5', at, { balance_usd: '3.50', balance_version: '4' }),
      ]),
    );
    expect(await findBalance(db, workspaceId)).toBe('3.00');
  });
});
