import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { ConnectError } from '@connectrpc/connect';
import { ActionLimits, readActionLimits } from '@switchboard/identity/action-limits';
import { LoginThrottle, pendingAttemptMs } from '@switchboard/identity/login-throttle';
import { Sessions } from '@switchboard/identity/sessions';
import { SigningKeys } from '@switchboard/identity/signing-keys';
import { insertOrganization } from '@switchboard/identity/store/organizations';
import { insertUser } from '@switchboard/identity/store/users';
import { createDb, type Knex, migrate } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import { createLogger } from '@switchboard/runtime/log';
import { recordEvent } from '@switchboard/runtime/outbox';
import { DataKeyRing } from '@switchboard/runtime/secrets';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, requireEnv } from './helpers.js';

/**
 * Identity's domain modules on their own, against a real migrated schema of their own (no
 * service process, no gateway): the decisions they make, with time moved by an injected clock.
 */

const schema = `identity_domain_${randomBytes(3).toString('hex')}`;
const log = createLogger('domain-test', 'silent');
let db: Knex;
// Starts at the real time: rows also get database defaults (now()) that the modules compare with.
let now = new Date();
const clock = () => now;
const advance = (ms: number) => {
  now = new Date(now.getTime() + ms);
};

beforeAll(async () => {
  db = createDb(requireEnv('DATABASE_URL'), schema, 4);
  await migrate(db, schema, path.join(repoRoot, 'services/identity/dist/migrations'));
});

afterAll(async () => {
  await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  await db.destroy();
});

async function newUser(passwordHash = 'stored-hash') {
  const orgId = newId('org');
  await insertOrganization(db, { id: orgId, name: 'Personal', personal: true });
  return insertUser(db, { id: newId('usr'), email: `${orgId}@example.com`, fullName: null, passwordHash, personalWorkspaceId: orgId });
}

describe('Sessions', () => {
  let sessions: Sessions;

  beforeAll(() => {
    const dataKeys = DataKeyRing.parse(DataKeyRing.generateEntry('k1'));
    sessions = new Sessions({
      db,
      dataKeys,
      signingKeys: new SigningKeys({ db, log, dataKeys }),
      recordEvent: (trx, schema, event) => recordEvent(trx, schema, event, { producer: 'identity', subjectPrefix: 'test' }),
      log,
      clock,
    });
  });

  it('opens a session only for an active user whose checked password is still current', async () => {
    const user = await newUser('hash-1');
    expect((await sessions.open(db, user.id, { checkedPasswordHash: 'hash-1' })).refreshToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
    await expect(sessions.open(db, user.id, { checkedPasswordHash: 'an older hash' })).rejects.toThrow(/incorrect/);
    await db('users').where({ id: user.id }).update({ deactivated_at: now });
    await expect(sessions.open(db, user.id)).rejects.toThrow(/incorrect/);
    // Nothing was half-written by the refusals: the one session of the first call.
    expect(await db('sessions').where({ user_id: user.id }).count('* as n').first()).toEqual({ n: 1 });
  });

  it('rotates refresh tokens, gives a reused parent the same successor within 10 s, and revokes the session after', async () => {
    const user = await newUser();
    const first = await sessions.open(db, user.id);
    const second = await sessions.refresh(first.refreshToken!);
    expect(second.refreshToken).not.toBe(first.refreshToken);
    // A second tab with the same token, within the grace: the same successor, no revocation.
    advance(5_000);
    expect((await sessions.refresh(first.refreshToken!)).refreshToken).toBe(second.refreshToken);
    // After the grace the reuse is a theft: the whole session ends, its successor too.
    advance(6_000);
    await expect(sessions.refresh(first.refreshToken!)).rejects.toThrow(/not valid/);
    await expect(sessions.refresh(second.refreshToken!)).rejects.toThrow(/not valid/);
    const events = await db('outbox').whereRaw("payload->>'type' = 'session.revoked'").whereRaw("payload->'data'->>'user_id' = ?", [user.id]);
    expect(events).toHaveLength(1);
    expect(events[0].payload.data.reason).toBe('refresh_token_reuse');
  });

  it('ends sessions after 7 idle days and after 30 days in all', async () => {
    const user = await newUser();
    const idle = await sessions.open(db, user.id);
    advance(7 * 24 * 3600 * 1000 + 1000);
    await expect(sessions.refresh(idle.refreshToken!)).rejects.toThrow(/not valid/);
    let active = await sessions.open(db, user.id);
    // Refreshed every 6 days (never idle for 7), it still ends 30 days after sign-in.
    for (let refresh = 0; refresh < 4; refresh++) {
      advance(6 * 24 * 3600 * 1000);
      active = await sessions.refresh(active.refreshToken!);
    }
    advance(6 * 24 * 3600 * 1000 + 1000);
    await expect(sessions.refresh(active.refreshToken!)).rejects.toThrow(/not valid/);
  });
});

describe('LoginThrottle', () => {
  it('refuses the sixth failure of an account within 15 minutes, right password or not, until the window passes', async () => {
    const throttle = new LoginThrottle({ db, log, clock });
    const account = `victim.${randomBytes(3).toString('hex')}@example.com`;
    for (let i = 0; i < 5; i++) await throttle.begin('password', { account, ip: `203.0.113.${i}` });
    const refusal = await throttle.begin('password', { account, ip: '203.0.113.99' }).catch((err: unknown) => ConnectError.from(err));
    expect(refusal).toBeInstanceOf(ConnectError);
    expect(Number((refusal as ConnectError).metadata.get('retry-after'))).toBe(15 * 60);
    advance(15 * 60 * 1000 + 1000);
    const attempt = await throttle.begin('password', { account, ip: '203.0.113.99' });
    // A success clears the account's counter at once.
    await throttle.succeed(attempt, 'password', account);
    for (let i = 0; i < 4; i++) await throttle.begin('password', { account });
  });

  it('lets no burst past the limit: of 12 attempts at once, at most 5 go on', async () => {
    const throttle = new LoginThrottle({ db, log, clock });
    const account = `burst.${randomBytes(3).toString('hex')}@example.com`;
    const outcomes = await Promise.allSettled(Array.from({ length: 12 }, () => throttle.begin('password', { account })));
    expect(outcomes.filter((o) => o.status === 'fulfilled').length).toBeLessThanOrEqual(5);
    expect(outcomes.filter((o) => o.status === 'rejected').length).toBeGreaterThanOrEqual(7);
  });

  it('counts an attempt whose process died mid-check for a minute only; a settled failure for the whole window', async () => {
    const throttle = new LoginThrottle({ db, log, clock });
    const crashed = `crashed.${randomBytes(3).toString('hex')}@example.com`;
    const failed = `failed.${randomBytes(3).toString('hex')}@example.com`;
    // Five attempts each: those of `crashed` never end (kill -9 mid-check), those of `failed` fail.
    for (let i = 0; i < 5; i++) await throttle.begin('password', { account: crashed });
    for (let i = 0; i < 5; i++) await throttle.fail(await throttle.begin('password', { account: failed }));
    // While they could still be under way, the pending ones count like failures (bursts see each other).
    await expect(throttle.begin('password', { account: crashed })).rejects.toThrow(/Too many failed attempts/);
    advance(pendingAttemptMs + 1000);
    await throttle.begin('password', { account: crashed });
    await expect(throttle.begin('password', { account: failed })).rejects.toThrow(/Too many failed attempts/);
  });

  it('counts IPv6 clients by their /64', async () => {
    const throttle = new LoginThrottle({ db, log, clock });
    const prefix = `2001:db8:${randomBytes(2).toString('hex')}:1`;
    for (let i = 0; i < 50; i++) await throttle.begin('second_factor', { ip: `${prefix}::${(i + 1).toString(16)}` });
    await expect(throttle.begin('second_factor', { ip: `${prefix}:ffff::1` })).rejects.toThrow(/Too many failed attempts/);
  });
});

describe('ActionLimits', () => {
  it('counts an action per subject over a sliding hour', async () => {
    const limits = new ActionLimits({ db, clock, limits: readActionLimits({ REGISTRATIONS_PER_IP_PER_HOUR: '2' }) });
    const ip = `198.18.${randomBytes(1)[0]}.7`;
    await limits.take('registration', { ip });
    advance(30 * 60 * 1000);
    await limits.take('registration', { ip });
    const refusal = ConnectError.from(await limits.take('registration', { ip }).catch((err: unknown) => err));
    expect(refusal.metadata.get('retry-after')).toBe(String(30 * 60));
    // Another address, and no address at all, are not limited by it.
    await limits.take('registration', { ip: '198.18.255.1' });
    await limits.take('registration', {});
    // When the first one leaves the hour, one more fits.
    advance(30 * 60 * 1000 + 1000);
    await limits.take('registration', { ip });
    expect(() => readActionLimits({ INVITATIONS_PER_USER_PER_HOUR: '0' })).toThrow(/INVITATIONS_PER_USER_PER_HOUR must be at least 1/);
  });
  it('lets a 100-person office behind one address sign up, make organizations, be invited and ask for mails within an hour by default', () => {
    // docs/operations.md#limits-for-an-office-behind-one-address: 100 people, room for retries.
    const limits = readActionLimits({});
    const perIp = (action: keyof typeof limits) => limits[action].find((limit) => limit.scope === 'ip')!.limit;
    expect(perIp('registration')).toBe(200);
    expect(perIp('organization_create')).toBe(200);
    expect(perIp('invitation')).toBe(300);
    expect(perIp('verification_resend')).toBe(300);
    expect(limits.invitation.find((limit) => limit.scope === 'user')!.limit).toBe(200);
    expect(readActionLimits({ VERIFICATION_RESENDS_PER_IP_PER_HOUR: '7' }).verification_resend).toEqual([{ scope: 'ip', limit: 7 }]);
  });
});
