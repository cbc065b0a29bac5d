import { createDb } from '@switchboard/runtime/db';
import { freePort } from '@switchboard/runtime/infra';
import { requireEnv } from '@switchboard/runtime/testing';
import { eventually, expectErrorBody } from '@switchboard/testkit/account-helpers';
import { meshSuiteOfFile, newUser } from '@switchboard/testkit/mesh';
import { describe, expect, it } from 'vitest';
import { RevokedSessions } from '../src/revocations.js';

/**
 * The revocation set without NATS: the gateway still starts and serves, and learns revocations
 * it did not proxy by polling identity (REVOCATION_POLL_INTERVAL).
 */

// Nothing listens there: every component runs with NATS unreachable.
const suite = meshSuiteOfFile(async () => ({ NATS_URL: `nats://127.0.0.1:${await freePort()}`, REVOCATION_POLL_INTERVAL: '200ms' }));

describe('revocation while NATS is down', () => {
  it('refuses a session revoked elsewhere within the poll interval', async () => {
    const user = newUser();
    const registered = await suite.call('POST', '/v1/auth/register', { body: user });
    expect(registered.status).toBe(201);
    const { access_token: accessToken, refresh_token: first } = registered.json.session;
    const second = (await suite.call('POST', '/v1/auth/refresh', { body: { refresh_token: first } })).json.session.refresh_token;
    await suite.call('POST', '/v1/auth/refresh', { body: { refresh_token: second } });
    expect((await suite.call('GET', '/v1/account', { token: accessToken })).status).toBe(200);
    // A replay of `first` revokes the session; this answer carries no revocation header.
    expectErrorBody(await suite.call('POST', '/v1/auth/refresh', { body: { refresh_token: first } }), 401, 'invalid_token');
    const started = Date.now();
    await eventually(async () => ((await suite.call('GET', '/v1/account', { token: accessToken })).status === 401 ? true : undefined), 'the poll', 3000, 20);
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('still applies a logout on the very next request (the revoking answer tells the gateway)', async () => {
    const registered = await suite.call('POST', '/v1/auth/register', { body: newUser() });
    const token = registered.json.session.access_token;
    expect((await suite.call('POST', '/v1/auth/logout', { token })).status).toBe(204);
    expectErrorBody(await suite.call('GET', '/v1/account', { token }), 401, 'session_revoked');
  });
});

describe('API keys while NATS is down', () => {
  it('manages keys and refuses a revoked key at once; the events wait in the outbox', async () => {
    const registered = await suite.call('POST', '/v1/auth/register', { body: newUser() });
    const token = registered.json.session.access_token;
    const created = await suite.call('POST', '/v1/keys', { token, body: { name: 'offline', monthly_spend_cap_usd: '1' } });
    expect(created.status, created.text).toBe(201);
    const { full_key: fullKey, key } = created.json;
    expect((await suite.call('PATCH', `/v1/keys/${key.key_id}/spend-cap`, { token, body: { clear: true } })).status).toBe(200);
    expect((await suite.call('GET', '/v1/account', { token: fullKey })).status).toBe(200);
    expect((await suite.call('DELETE', `/v1/keys/${key.key_id}`, { token })).status).toBe(200);
    expectErrorBody(await suite.call('GET', '/v1/account', { token: fullKey }), 401, 'api_key_revoked');
    const db = createDb(requireEnv('DATABASE_URL'), 'keys', 1);
    try {
      const waiting = await db('outbox').whereNull('published_at').whereRaw(`payload->'data'->>'key_id' = ?`, [key.key_id]).pluck('subject');
      expect(waiting.map((subject: string) => subject.split('.').slice(-2).join('.')).sort()).toEqual(['key.created', 'key.revoked', 'key.updated']);
    } finally {
      await db.destroy();
    }
  });
});

describe('the revoked-session set', () => {
  it('forgets a session once its access tokens have expired (bounded)', () => {
    let now = 1_000_000;
    const set = new RevokedSessions(() => now);
    set.add(['ses_a'], now);
    expect(set.has('ses_a')).toBe(true);
    expect(set.has('ses_b')).toBe(false);
    now += 15 * 60_000;
    expect(set.has('ses_a')).toBe(true);
    now += 61_000;
    expect(set.has('ses_a')).toBe(false);
    set.add(['ses_b'], now);
    expect(set.size).toBe(1);
  });
});
