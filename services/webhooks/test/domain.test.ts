import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDb, type Knex, migrate } from '@switchboard/runtime/db';
import { newId, newSigningSecret } from '@switchboard/runtime/ids';
import { requireEnv } from '@switchboard/runtime/testing';
import { CircuitBreakers } from '@switchboard/webhooks/circuit-breakers';
import { nextState } from '@switchboard/webhooks/outcomes';
import { RetrySchedule } from '@switchboard/webhooks/retry-schedule';
import { signatureHeaders } from '@switchboard/webhooks/signing';
import { claimDue, fanOut, insertDelivery, insertEvent, sweepExpiredLeases } from '@switchboard/webhooks/store/deliveries';
import { clearFailureClocks, insertEndpoint, recordEndpointFailure, updateEndpoint, upsertAlertTarget } from '@switchboard/webhooks/store/endpoints';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The webhooks service's decisions on their own: signatures as `standardwebhooks` verifies them,
 * the retry schedule, the state after an attempt, circuit breakers, and the queue's claims
 * against a migrated schema of their own.
 */

const schema = `webhooks_domain_${randomBytes(3).toString('hex')}`;
const migrations = path.join(fileURLToPath(new URL('../dist/migrations/', import.meta.url)));
let db: Knex;

beforeAll(async () => {
  db = createDb(requireEnv('DATABASE_URL'), schema, 4);
  await migrate(db, schema, migrations);
});

afterAll(async () => {
  await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  await db.destroy();
});

describe('signatures', () => {
  it('verify with the standardwebhooks package, with either secret during a rotation', () => {
    const [current, previous, stranger] = [newSigningSecret(), newSigningSecret(), newSigningSecret()];
    const body = JSON.stringify({ type: 'webhook.test', timestamp: new Date().toISOString(), data: { ok: true } });
    const headers = signatureHeaders('dlv_1', body, [current, previous], new Date());
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(current).verify(body, headers)).toMatchObject({ data: { ok: true } });
    expect(new Webhook(previous).verify(body, headers)).toMatchObject({ data: { ok: true } });
    expect(() => new Webhook(stranger).verify(body, headers)).toThrow();
    expect(() => new Webhook(current).verify(`${body} `, headers)).toThrow();
    // An attempt signed long ago is refused by receivers (replay protection).
    const old = signatureHeaders('dlv_1', body, [current], new Date(Date.now() - 3_600_000));
    expect(() => new Webhook(current).verify(body, old)).toThrow();
  });
});

describe('the retry schedule', () => {
  it('parses durations, names a bad entry, and jitters each delay within ±20%', () => {
    expect(RetrySchedule.parse('5s,5m,30m,2h,5h,10h,10h').delaysMs).toEqual([5000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
    expect(RetrySchedule.parse(' 50ms , 100ms ').delaysMs).toEqual([50, 100]);
    expect(RetrySchedule.parse('').delaysMs).toEqual([]);
    expect(() => RetrySchedule.parse('5s,soon')).toThrow(/entry 2/);
    expect(new RetrySchedule([1000], () => 0).delayAfter(1)).toBe(800);
    expect(new RetrySchedule([1000], () => 1).delayAfter(1)).toBe(1200);
    expect(new RetrySchedule([1000], () => 0.5).delayAfter(2)).toBeUndefined();
  });

  it('honours Retry-After within [1×, 2×] of the scheduled delay', () => {
    const schedule = new RetrySchedule([1000], () => 0.5);
    expect(schedule.delayAfter(1, 10)).toBe(1000);
    expect(schedule.delayAfter(1, 1500)).toBe(1500);
    expect(schedule.delayAfter(1, 60_000)).toBe(2000);
  });
});

describe('the state after an attempt', () => {
  const schedule = new RetrySchedule([100, 200], () => 0.5);
  const failed = { ok: false };

  it('allows N + 1 scheduled attempts, then exhausts', () => {
    expect(nextState({ status: 'pending', scheduled_attempts: 0 }, { next_trigger: 'event' }, failed, schedule)).toEqual({
      status: 'failed',
      scheduledAttempts: 1,
      retryInMs: 100,
    });
    expect(nextState({ status: 'failed', scheduled_attempts: 1 }, { next_trigger: 'retry' }, failed, schedule)).toEqual({
      status: 'failed',
      scheduledAttempts: 2,
      retryInMs: 200,
    });
    expect(nextState({ status: 'failed', scheduled_attempts: 2 }, { next_trigger: 'retry' }, failed, schedule)).toEqual({
      status: 'exhausted',
      scheduledAttempts: 3,
    });
    expect(nextState({ status: 'pending', scheduled_attempts: 0 }, { next_trigger: 'test' }, { ok: true }, schedule)).toEqual({
      status: 'succeeded',
      scheduledAttempts: 1,
    });
  });

  it('does not count a manual attempt: a failed one resumes the retries left, or stays exhausted', () => {
    expect(nextState({ status: 'failed', scheduled_attempts: 1 }, { next_trigger: 'manual' }, failed, schedule)).toEqual({
      status: 'failed',
      scheduledAttempts: 1,
      retryInMs: 100,
    });
    expect(nextState({ status: 'pending', scheduled_attempts: 3 }, { next_trigger: 'manual' }, failed, schedule)).toEqual({
      status: 'exhausted',
      scheduledAttempts: 3,
    });
    expect(nextState({ status: 'pending', scheduled_attempts: 3 }, { next_trigger: 'manual' }, { ok: true }, schedule)).toEqual({
      status: 'succeeded',
      scheduledAttempts: 3,
    });
  });

  it('keeps a delivered delivery succeeded when its manual redelivery fails, with no retries started', () => {
    expect(nextState({ status: 'succeeded', scheduled_attempts: 1 }, { next_trigger: 'manual' }, failed, schedule)).toEqual({
      status: 'succeeded',
      scheduledAttempts: 1,
    });
  });
});

describe('circuit breakers', () => {
  it('open after the threshold, let one probe through after the cooldown, and close on a success', () => {
    let now = 0;
    const circuits = new CircuitBreakers({ threshold: 2, cooldownMs: 1000 }, () => now);
    circuits.record('wh_a', false);
    expect(circuits.limits().size).toBe(0);
    circuits.record('wh_a', false);
    expect(circuits.limits().get('wh_a')).toBe(0);
    expect(circuits.nextProbeAt()).toBe(1000);
    now = 1000;
    expect(circuits.limits().get('wh_a')).toBe(1);
    circuits.claimed('wh_a');
    expect(circuits.limits().get('wh_a')).toBe(0);
    circuits.record('wh_a', false);
    expect(circuits.nextProbeAt()).toBe(2000);
    now = 2000;
    circuits.claimed('wh_a');
    circuits.record('wh_a', true);
    expect(circuits.limits().size).toBe(0);
  });

  it('let another probe through when one ended without an outcome, and forget endpoints idle for an hour', () => {
    let now = 0;
    const circuits = new CircuitBreakers({ threshold: 1, cooldownMs: 1000 }, () => now);
    circuits.record('wh_b', false);
    now = 1000;
    circuits.claimed('wh_b');
    expect(circuits.limits().get('wh_b')).toBe(0);
    circuits.released('wh_b');
    expect(circuits.limits().get('wh_b')).toBe(1);
    now = 3_600_001;
    expect(circuits.limits().has('wh_b')).toBe(false);
  });
});

describe('the queue', () => {
  async function endpointWithDeliveries(count: number) {
    const workspaceId = newId('org');
    const endpoint = await insertEndpoint(db, {
      id: newId('wh'),
      workspaceId,
      url: 'https://example.com/hook',
      events: [],
      description: null,
      secretEncrypted: 'sealed',
      createdBy: newId('usr'),
    });
    await db.transaction(async (trx) => {
      for (let i = 0; i < count; i++) {
        const id = newId('evt');
        await insertEvent(trx, { id, type: 'agent.completed', workspaceId, occurredAt: new Date().toISOString(), body: '{}' });
        await fanOut(trx, [{ id, type: 'agent.completed', workspaceId }]);
      }
    });
    return endpoint;
  }

  it('claims at most the per-endpoint limit minus what is in flight, never a claimed row twice, and nothing of a disabled endpoint', async () => {
    const busy = await endpointWithDeliveries(10);
    const quiet = await endpointWithDeliveries(3);
    const disabled = await endpointWithDeliveries(3);
    await db.transaction((trx) => updateEndpoint(trx, disabled.id, { enabled: false }));
    const options = { limit: 100, perEndpoint: 4, perWorkspace: 100, busy: new Map([[busy.id, 1]]), busyWorkspaces: new Map(), excluded: [], leaseMs: 60_000 };
    const first = await claimDue(db, options);
    const countOf = (claims: typeof first, id: string) => claims.filter((claim) => claim.endpoint_id === id).length;
    expect(countOf(first, busy.id)).toBe(3);
    expect(countOf(first, quiet.id)).toBe(3);
    expect(countOf(first, disabled.id)).toBe(0);
    // Concurrent claims (another replica) never take the same row.
    const [a, b] = await Promise.all([claimDue(db, { ...options, busy: new Map() }), claimDue(db, { ...options, busy: new Map() })]);
    const ids = [...first, ...a, ...b].map((claim) => claim.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(countOf([...a, ...b], busy.id)).toBeLessThanOrEqual(7);
    expect(await claimDue(db, { ...options, excluded: [busy.id, quiet.id] })).toEqual([]);
  });

  it('claims round-robin across workspaces, key alert targets in theirs, and never past a workspace’s cap', async () => {
    const heavy = newId('org');
    const light = newId('org');
    const webhook = (workspaceId: string) =>
      insertEndpoint(db, {
        id: newId('wh'),
        workspaceId,
        url: 'https://example.com/hook',
        events: [],
        description: null,
        secretEncrypted: 'sealed',
        createdBy: newId('usr'),
      });
    const heavyEndpoints = await Promise.all([webhook(heavy), webhook(heavy), webhook(heavy)]);
    const lightEndpoint = await webhook(light);
    const alertKey = newId('key');
    await db.transaction(async (trx) => {
      for (let i = 0; i < 10; i++) {
        const id = newId('evt');
        await insertEvent(trx, { id, type: 'agent.completed', workspaceId: heavy, occurredAt: new Date().toISOString(), body: '{}' });
        await fanOut(trx, [{ id, type: 'agent.completed', workspaceId: heavy }]);
      }
      for (let i = 0; i < 2; i++) {
        const id = newId('evt');
        await insertEvent(trx, { id, type: 'agent.completed', workspaceId: light, occurredAt: new Date().toISOString(), body: '{}' });
        await fanOut(trx, [{ id, type: 'agent.completed', workspaceId: light }]);
        const alert = newId('evt');
        await insertEvent(trx, { id: alert, type: 'key.spend_alert', workspaceId: light, occurredAt: new Date().toISOString(), body: '{}' });
        await upsertAlertTarget(trx, { keyId: alertKey, workspaceId: light, url: 'https://example.com/alert' });
        await insertDelivery(trx, { endpointId: alertKey, eventId: alert, eventType: 'key.spend_alert', trigger: 'event' });
      }
    });
    // The heavy workspace's 30 rows have waited longest: a global FIFO would hand it every slot.
    await db('deliveries')
      .whereIn(
        'endpoint_id',
        heavyEndpoints.map((endpoint) => endpoint.id),
      )
      .update({ next_attempt_at: db.raw(`now() - interval '1 minute'`) });
    const mine = [...heavyEndpoints.map((endpoint) => endpoint.id), lightEndpoint.id, alertKey];
    const excluded: string[] = await db('endpoints').whereNotIn('id', mine).pluck('id');
    const options = { perEndpoint: 8, perWorkspace: 100, busy: new Map(), busyWorkspaces: new Map(), excluded, leaseMs: 60_000 };
    const byWorkspace = (claims: Awaited<ReturnType<typeof claimDue>>) =>
      Object.fromEntries([heavy, light].map((id) => [id === heavy ? 'heavy' : 'light', claims.filter((claim) => claim.workspace_id === id).length]));

    // Turn 1 is each workspace's oldest row, turn 2 each one's second: 2 and 2 of 4, whatever their age.
    const first = await claimDue(db, { ...options, limit: 4 });
    expect(byWorkspace(first)).toEqual({ heavy: 2, light: 2 });
    // The key's alert target counts in its workspace: of the light workspace's 2 slots, 1 is in flight.
    const capped = await claimDue(db, { ...options, limit: 100, perWorkspace: 2, busyWorkspaces: new Map([[light, 1]]) });
    expect(byWorkspace(capped)).toEqual({ heavy: 2, light: 1 });
    // A workspace at its cap gets nothing; the others still get theirs.
    const rest = await claimDue(db, { ...options, limit: 100, perWorkspace: 3, busyWorkspaces: new Map([[heavy, 3]]) });
    expect(byWorkspace(rest)).toEqual({ heavy: 0, light: 1 });
    expect(rest[0].kind === 'key_alert' || rest[0].endpoint_id === lightEndpoint.id).toBe(true);
  });

  it('frees expired leases for another claim', async () => {
    const endpoint = await endpointWithDeliveries(1);
    const options = { limit: 10, perEndpoint: 4, perWorkspace: 100, busy: new Map(), busyWorkspaces: new Map(), excluded: [], leaseMs: 1 };
    const [claimed] = (await claimDue(db, options)).filter((claim) => claim.endpoint_id === endpoint.id);
    expect(claimed).toBeDefined();
    await db.raw('SELECT pg_sleep(0.01)');
    expect(await sweepExpiredLeases(db)).toBeGreaterThanOrEqual(1);
    const again = (await claimDue(db, { ...options, leaseMs: 60_000 })).filter((claim) => claim.endpoint_id === endpoint.id);
    expect(again.map((claim) => claim.id)).toEqual([claimed.id]);
    expect(again[0].lease_token).not.toBe(claimed.lease_token);
  });

  it('starts an endpoint’s failure clock, disables it after the limit or at once on 410, and stops the clock on a success', async () => {
    const endpoint = await endpointWithDeliveries(0);
    const outcome = (success: boolean, gone = false, disableAfterMs = 60_000) =>
      db.transaction(async (trx) => {
        if (!success) return recordEndpointFailure(trx, endpoint.id, { gone, disableAfterMs });
        await clearFailureClocks(trx, [endpoint.id]);
        return undefined;
      });
    expect(await outcome(false)).toBeUndefined();
    const failing = await db('endpoints').where({ id: endpoint.id }).first();
    expect(failing.failing_since).toBeInstanceOf(Date);
    expect(await outcome(true)).toBeUndefined();
    expect((await db('endpoints').where({ id: endpoint.id }).first()).failing_since).toBeNull();
    await outcome(false);
    await db.raw(`UPDATE endpoints SET failing_since = now() - interval '2 minutes' WHERE id = ?`, [endpoint.id]);
    expect(await outcome(false)).toMatchObject({ enabled: false, disabled_reason: 'failing' });
    const other = await endpointWithDeliveries(0);
    expect(await db.transaction((trx) => recordEndpointFailure(trx, other.id, { gone: true, disableAfterMs: 60_000 }))).toMatchObject({
      disabled_reason: 'endpoint_gone',
    });
  });
});
