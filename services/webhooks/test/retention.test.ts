import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDb, type Knex, migrate } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import { createLogger } from '@switchboard/runtime/log';
import { requireEnv } from '@switchboard/runtime/testing';
import { readWebhooksConfig } from '@switchboard/webhooks/config';
import { Retention, type RetentionBatch } from '@switchboard/webhooks/retention';
import { claimDue, finishAttempts, insertAttempts } from '@switchboard/webhooks/store/deliveries';
import { insertEndpoint, updateEndpoint } from '@switchboard/webhooks/store/endpoints';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Retention (docs/webhooks.md#retention) against a migrated schema of its own: what goes and
 * what stays on either side of WEBHOOK_RETENTION and of the 7 days of response bodies (rows
 * backdated by SQL), batches, and deliveries claimed and finished while it runs.
 */

const schema = `webhooks_retention_${randomBytes(3).toString('hex')}`;
const migrations = path.join(fileURLToPath(new URL('../dist/migrations/', import.meta.url)));
const day = 24 * 3_600_000;
const retentionMs = 30 * day;
let db: Knex;

beforeAll(async () => {
  db = createDb(requireEnv('DATABASE_URL'), schema, 8);
  await migrate(db, schema, migrations);
});

afterAll(async () => {
  await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  await db.destroy();
});

function retention(onBatch?: (batch: RetentionBatch) => void) {
  return new Retention({ db, log: createLogger('webhooks-retention-test', 'silent'), retentionMs, onBatch });
}

async function endpoint() {
  return insertEndpoint(db, {
    id: newId('wh'),
    workspaceId: newId('org'),
    url: 'https://example.com/hook',
    events: [],
    description: null,
    secretEncrypted: 'sealed',
    createdBy: newId('usr'),
  });
}

/**
 * `count` deliveries to `endpointId` created `ageMs` ago, each of its own event and with two
 * attempts of that age (bodies kept), in the state given.
 */
async function seed(
  endpointId: string,
  count: number,
  ageMs: number,
  state: { status?: string; nextAttemptInMs?: number | null; leased?: boolean } = {},
): Promise<{ deliveries: string[]; events: string[] }> {
  const tag = randomBytes(4).toString('hex');
  const at = db.raw(`now() - ? * interval '1 millisecond'`, [ageMs]);
  const nextAt = state.nextAttemptInMs == null ? null : db.raw(`now() + ? * interval '1 millisecond'`, [state.nextAttemptInMs]);
  await db.raw(
    `INSERT INTO events (id, type, workspace_id, occurred_at, body, created_at)
     SELECT 'evt_' || ? || g, 'agent.completed', 'org_x', ?, '{}', ? FROM generate_series(1, ?::int) g`,
    [tag, at, at, count],
  );
  await db.raw(
    `INSERT INTO deliveries (id, endpoint_id, event_id, event_type, status, attempt_count, next_attempt_at, leased_until, lease_token, created_at)
     SELECT 'dlv_' || ? || g, ?, 'evt_' || ? || g, 'agent.completed', ?, 2, ?, ?, ?, ? FROM generate_series(1, ?::int) g`,
    [
      tag,
      endpointId,
      tag,
      state.status ?? 'succeeded',
      nextAt,
      state.leased ? db.raw(`now() + interval '1 minute'`) : null,
      state.leased ? 'lease_x' : null,
      at,
      count,
    ],
  );
  await db.raw(
    `INSERT INTO attempts (id, delivery_id, url, status, response_status_code, duration_ms, response_body, trigger, created_at)
     SELECT 'att_' || ? || g || '_' || n, 'dlv_' || ? || g, 'https://example.com/hook', 'failed', 500, 12, 'boom', 'event', ?
     FROM generate_series(1, ?::int) g, generate_series(1, 2) n`,
    [tag, tag, at, count],
  );
  return {
    deliveries: Array.from({ length: count }, (_, i) => `dlv_${tag}${i + 1}`),
    events: Array.from({ length: count }, (_, i) => `evt_${tag}${i + 1}`),
  };
}

const countOf = async (table: string, column: string, ids: string[]) => Number((await db(table).whereIn(column, ids).count({ n: '*' }))[0].n);
const minute = 60_000;

describe('retention', () => {
  it('keeps 30 days unless WEBHOOK_RETENTION says otherwise (at least an hour)', () => {
    expect(readWebhooksConfig({}).retentionMs).toBe(30 * day);
    expect(readWebhooksConfig({ WEBHOOK_RETENTION: '90d' }).retentionMs).toBe(90 * day);
    expect(() => readWebhooksConfig({ WEBHOOK_RETENTION: '10m' })).toThrow(/WEBHOOK_RETENTION/);
  });

  it('deletes deliveries, their attempts and their events just older than WEBHOOK_RETENTION, and keeps those just newer', async () => {
    const target = await endpoint();
    const old = await seed(target.id, 3, retentionMs + minute);
    const recent = await seed(target.id, 3, retentionMs - minute);
    // An old event still referenced by a recent delivery (another endpoint's) stays with it.
    const other = await endpoint();
    await db('deliveries').insert({ id: newId('dlv'), endpoint_id: other.id, event_id: old.events[0], event_type: 'agent.completed', status: 'succeeded' });
    // Events no delivery ever referenced (no endpoint subscribed) go by their own age.
    const lonelyOld = newId('evt');
    const lonelyRecent = newId('evt');
    await db('events').insert([
      { id: lonelyOld, type: 'key.created', workspace_id: 'org_x', occurred_at: new Date(), body: '{}', created_at: db.raw(`now() - interval '31 days'`) },
      { id: lonelyRecent, type: 'key.created', workspace_id: 'org_x', occurred_at: new Date(), body: '{}', created_at: db.raw(`now() - interval '29 days'`) },
    ]);

    const removed = await retention().run();
    expect(removed.deliveries).toBeGreaterThanOrEqual(3);
    expect(await countOf('deliveries', 'id', old.deliveries)).toBe(0);
    expect(await countOf('attempts', 'delivery_id', old.deliveries)).toBe(0);
    expect(await countOf('events', 'id', old.events)).toBe(1);
    expect(await countOf('events', 'id', [old.events[0]])).toBe(1);
    expect(await countOf('deliveries', 'id', recent.deliveries)).toBe(3);
    expect(await countOf('attempts', 'delivery_id', recent.deliveries)).toBe(6);
    expect(await countOf('events', 'id', recent.events)).toBe(3);
    expect(await countOf('events', 'id', [lonelyOld])).toBe(0);
    expect(await countOf('events', 'id', [lonelyRecent])).toBe(1);
  });

  it('keeps old deliveries in flight or still retrying on an enabled endpoint; drops those waiting on a disabled one', async () => {
    const enabled = await endpoint();
    const disabled = await endpoint();
    await db.transaction((trx) => updateEndpoint(trx, disabled.id, { enabled: false }));
    const retrying = await seed(enabled.id, 2, retentionMs + minute, { status: 'failed', nextAttemptInMs: minute });
    const inFlight = await seed(enabled.id, 2, retentionMs + minute, { status: 'failed', nextAttemptInMs: -minute, leased: true });
    const waiting = await seed(disabled.id, 2, retentionMs + minute, { status: 'failed', nextAttemptInMs: -minute });
    const exhausted = await seed(enabled.id, 2, retentionMs + minute, { status: 'exhausted' });

    await retention().run();
    expect(await countOf('deliveries', 'id', retrying.deliveries)).toBe(2);
    expect(await countOf('deliveries', 'id', inFlight.deliveries)).toBe(2);
    expect(await countOf('attempts', 'delivery_id', inFlight.deliveries)).toBe(4);
    expect(await countOf('deliveries', 'id', waiting.deliveries)).toBe(0);
    expect(await countOf('deliveries', 'id', exhausted.deliveries)).toBe(0);
  });

  it('drops response bodies older than 7 days only, keeping the attempts', async () => {
    const target = await endpoint();
    const older = await seed(target.id, 2, 7 * day + minute);
    const newer = await seed(target.id, 2, 7 * day - minute);
    await retention().run();
    const bodies = async (deliveries: string[]) =>
      (await db('attempts').whereIn('delivery_id', deliveries).select('response_body')).map((row) => row.response_body);
    expect(await bodies(older.deliveries)).toEqual([null, null, null, null]);
    expect(await bodies(newer.deliveries)).toEqual(['boom', 'boom', 'boom', 'boom']);
    expect(await countOf('deliveries', 'id', older.deliveries)).toBe(2);
  });

  it('works in batches while deliveries are claimed and finished, and never takes a delivery that goes on', async () => {
    const archive = await endpoint();
    const old = await seed(archive.id, 3000, retentionMs + day);
    const live = await endpoint();
    const due = await seed(live.id, 300, 0, { status: 'pending', nextAttemptInMs: 0 });

    const batches: RetentionBatch[] = [];
    const sent = new Map<string, number>();
    let claiming = true;
    const deliver = async () => {
      while (claiming || sent.size < due.deliveries.length) {
        const claims = (
          await claimDue(db, { limit: 20, perEndpoint: 20, perWorkspace: 20, busy: new Map(), busyWorkspaces: new Map(), excluded: [], leaseMs: 60_000 })
        ).filter((claim) => claim.endpoint_id === live.id);
        if (claims.length === 0 && !claiming) break;
        await db.transaction(async (trx) => {
          await insertAttempts(
            trx,
            claims.map((claim) => ({
              delivery_id: claim.id,
              url: claim.url,
              status: 'success',
              response_status_code: 200,
              error_class: null,
              duration_ms: 1,
              response_body: 'ok',
              trigger: claim.next_trigger,
            })),
          );
          await finishAttempts(
            trx,
            claims.map((claim) => ({ id: claim.id, status: 'succeeded', scheduledAttempts: 1, nextAttemptAt: null, succeeded: true })),
          );
        });
        for (const claim of claims) sent.set(claim.id, (sent.get(claim.id) ?? 0) + 1);
      }
    };
    const delivering = deliver();
    const removed = await retention((batch) => batches.push(batch)).run();
    claiming = false;
    await delivering;

    expect(removed.deliveries).toBeGreaterThanOrEqual(3000);
    expect(await countOf('deliveries', 'id', old.deliveries)).toBe(0);
    expect(await countOf('attempts', 'delivery_id', old.deliveries)).toBe(0);
    // Several batches, none larger than the adaptive maximum.
    expect(batches.filter((batch) => batch.step === 'deliveries').length).toBeGreaterThan(1);
    for (const batch of batches) expect(batch.rows).toBeLessThanOrEqual(2000);
    // Every live delivery was claimed exactly once and finished; none was removed.
    expect([...sent.values()].every((times) => times === 1)).toBe(true);
    expect(sent.size).toBe(due.deliveries.length);
    const states = await db('deliveries').whereIn('id', due.deliveries).select('status');
    expect(states.map((row) => row.status)).toEqual(due.deliveries.map(() => 'succeeded'));
  });

  it('builds its indexes valid', async () => {
    const { rows } = await db.raw<{ rows: Array<{ name: string; valid: boolean }> }>(
      `SELECT c.relname AS name, i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
       WHERE c.relnamespace = ?::regnamespace AND c.relname IN ('deliveries_created_idx', 'events_created_idx', 'attempts_body_created_idx') ORDER BY 1`,
      [schema],
    );
    expect(rows).toEqual([
      { name: 'attempts_body_created_idx', valid: true },
      { name: 'deliveries_created_idx', valid: true },
      { name: 'events_created_idx', valid: true },
    ]);
  });
});
