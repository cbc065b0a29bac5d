import http from 'node:http';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { createDb } from '@switchboard/runtime/db';
import { eventually, requireEnv } from '@switchboard/runtime/testing';
import { expectErrorBody, meshSuiteOfFile, signUp } from '@switchboard/testkit/mesh';
import { describe, expect, it } from 'vitest';
import { maxKeptBodyBytes } from '../src/idempotency.js';

/**
 * Idempotency-Key on the POSTs of the REST surface (docs/conventions.md#idempotency), through
 * the real path: REST → gateway → services → Postgres, the answers kept in NATS.
 */
const suite = meshSuiteOfFile();

let counter = 0;
const newKey = () => `test-${Date.now().toString(36)}-${++counter}`;

describe('Idempotency-Key', () => {
  it('refuses an empty key and one of 256 characters with a 400 naming the header, and runs nothing', async () => {
    const user = await signUp(suite.call);
    for (const key of ['', 'k'.repeat(256), 'tab\there']) {
      const response = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'refused' }, headers: { 'idempotency-key': key } });
      expectErrorBody(response, 400, 'invalid_request', 'Idempotency-Key');
    }
    const accepted = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'longest' }, headers: { 'idempotency-key': 'k'.repeat(255) } });
    expect(accepted.status, accepted.text).toBe(201);
    const keys = await suite.call('GET', '/v1/keys', { token: user.token });
    expect(keys.json.data.map((key: { name: string }) => key.name)).toEqual(['longest']);
  });

  it('runs 20 concurrent identical POST /v1/keys once: one key, the same 201 and body for all, the others flagged as replays', async () => {
    const user = await signUp(suite.call);
    const key = newKey();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'once' }, headers: { 'idempotency-key': key } })),
    );
    for (const answer of answers) {
      expect(answer.status, answer.text).toBe(201);
      expect(answer.text).toBe(answers[0].text);
      expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(answer.headers.get('cache-control')).toBe('no-store');
    }
    expect(answers.filter((answer) => answer.headers.get('idempotent-replayed') === 'true')).toHaveLength(19);
    const keys = await suite.call('GET', '/v1/keys', { token: user.token });
    expect(keys.json.data.map((k: { key_id: string }) => k.key_id)).toEqual([answers[0].json.key.key_id]);

    // After completion: the same answer again (full_key included), flagged.
    const again = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'once' }, headers: { 'idempotency-key': key } });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.json).toEqual(answers[0].json);
    expect((await suite.call('GET', '/v1/keys', { token: user.token })).json.data).toHaveLength(1);
  });

  it('answers 422 idempotency_key_reused for the same key with another body, path, query or route', async () => {
    const user = await signUp(suite.call);
    const key = newKey();
    const first = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'first' }, headers: { 'idempotency-key': key } });
    expect(first.status).toBe(201);
    const reused = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'second' }, headers: { 'idempotency-key': key } });
    expectErrorBody(reused, 422, 'idempotency_key_reused', 'Idempotency-Key');
    // The same bytes but another query string is another request too.
    const withQuery = await suite.call('POST', '/v1/keys?x=1', { token: user.token, body: { name: 'first' }, headers: { 'idempotency-key': key } });
    expectErrorBody(withQuery, 422, 'idempotency_key_reused', 'Idempotency-Key');
    // The key belongs to the principal and workspace, not to a route: on another route it is another request with the same key.
    const conversation = await suite.call('POST', '/v1/conversations', { token: user.token, body: {}, headers: { 'idempotency-key': key } });
    expectErrorBody(conversation, 422, 'idempotency_key_reused', 'Idempotency-Key');
    expect((await suite.call('GET', '/v1/conversations', { token: user.token })).json.data).toEqual([]);
    expect((await suite.call('GET', '/v1/keys', { token: user.token })).json.data).toHaveLength(1);
  });

  it('keeps one key per principal and workspace: another user, and an API key of the same user, are not affected', async () => {
    const [alice, bob] = [await signUp(suite.call), await signUp(suite.call)];
    const key = newKey();
    const headers = { 'idempotency-key': key };
    const aliceKey = await suite.call('POST', '/v1/keys', { token: alice.token, body: { name: 'shared' }, headers });
    const bobKey = await suite.call('POST', '/v1/keys', { token: bob.token, body: { name: 'shared' }, headers });
    expect([aliceKey.status, bobKey.status]).toEqual([201, 201]);
    expect(bobKey.headers.get('idempotent-replayed')).toBeNull();
    expect(bobKey.json.key.key_id).not.toBe(aliceKey.json.key.key_id);
    const byApiKey = await suite.call('POST', '/v1/keys', { token: aliceKey.json.full_key, body: { name: 'shared' }, headers });
    expect(byApiKey.status, byApiKey.text).toBe(201);
    expect(byApiKey.headers.get('idempotent-replayed')).toBeNull();
    expect((await suite.call('GET', '/v1/keys', { token: alice.token })).json.data).toHaveLength(2);
  });

  it('replays a refusal of the service with its status, and the request id of the replay', async () => {
    const user = await signUp(suite.call);
    const key = newKey();
    const body = { name: 'x', monthly_spend_cap_usd: '-1' };
    const first = await suite.call('POST', '/v1/keys', { token: user.token, body, headers: { 'idempotency-key': key } });
    expectErrorBody(first, 400);
    const replay = await suite.call('POST', '/v1/keys', { token: user.token, body, headers: { 'idempotency-key': key } });
    expectErrorBody(replay, 400, first.json.error.code, first.json.error.field);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.json.error.message).toBe(first.json.error.message);
    expect(replay.json.error.request_id).not.toBe(first.json.error.request_id);
  });

  it('does not replay Set-Cookie, and replays a sign-in without credentials per client address', async () => {
    const user = await signUp(suite.call);
    const key = newKey();
    const options = { body: { email: user.email, password: user.password }, headers: { 'idempotency-key': key, 'x-switchboard-session': 'cookie' } };
    const first = await suite.call('POST', '/v1/auth/login', options);
    expect(first.status, first.text).toBe(200);
    expect(first.headers.get('set-cookie')).toBeTruthy();
    const replay = await suite.call('POST', '/v1/auth/login', options);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('set-cookie')).toBeNull();
    expect(replay.json).toEqual(first.json);
  });

  it('keeps answers sealed in NATS: no secret of a kept answer can be read there', async () => {
    const user = await signUp(suite.call);
    const created = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'sealed' }, headers: { 'idempotency-key': newKey() } });
    expect(created.status).toBe(201);
    const fullKey: string = created.json.full_key;
    const nc = await connect({ servers: suite.mesh.env.NATS_URL });
    try {
      const kv = await new Kvm(nc).open(`${suite.mesh.env.SWITCHBOARD_NAMESPACE}-idempotency`);
      const entries: Array<{ name: string; value: string }> = [];
      for await (const name of await kv.keys()) {
        const entry = await kv.get(name);
        if (entry?.operation === 'PUT') entries.push({ name, value: entry.string() });
      }
      expect(entries.length).toBeGreaterThan(0);
      const secret = fullKey.slice(-24);
      for (const { name, value } of entries) {
        expect(name).toMatch(/^[0-9a-f]{64}$/);
        expect(value).not.toContain(secret);
        expect(value).not.toContain(user.userId);
        // The answer is ciphertext: neither its JSON nor the body's base64 shows through.
        const { answer } = JSON.parse(value) as { answer?: string };
        const opened = Buffer.from(answer ?? '', 'base64url').toString('latin1');
        for (const visible of ['status', 'full_key', 'content-type']) expect(opened).not.toContain(visible);
      }
    } finally {
      await nc.close();
    }
  });

  it('does not keep an answer larger than the bound, and never runs the request twice', async () => {
    const user = await signUp(suite.call);
    const conversation = await suite.call('POST', '/v1/conversations', { token: user.token, body: {} });
    expect(conversation.status, conversation.text).toBe(201);
    const path = `/v1/conversations/${conversation.json.conversation_id}/messages`;
    // 200 000 characters of two UTF-8 bytes each: an answer past the bound.
    const body = { role: 'user', content: 'é'.repeat(200_000) };
    const key = newKey();
    const first = await suite.call('POST', path, { token: user.token, body, headers: { 'idempotency-key': key } });
    expect(first.status, first.text.slice(0, 500)).toBe(201);
    expect(Buffer.byteLength(first.text)).toBeGreaterThan(maxKeptBodyBytes);
    const retry = await suite.call('POST', path, { token: user.token, body, headers: { 'idempotency-key': key } });
    expectErrorBody(retry, 409, 'idempotent_result_unavailable');
    const messages = await suite.call('GET', path, { token: user.token });
    expect(messages.json.data).toHaveLength(1);
  });

  it('does not keep a 503: the key is released and a retry runs once the service is back', async () => {
    const user = await signUp(suite.call);
    const key = newKey();
    const post = () => suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'after outage' }, headers: { 'idempotency-key': key } });
    await suite.mesh.stopComponent('keys');
    try {
      expectErrorBody(await post(), 503, 'service_unavailable');
    } finally {
      await suite.mesh.startComponent('keys');
    }
    const ran = await post();
    expect(ran.status, ran.text).toBe(201);
    expect(ran.headers.get('idempotent-replayed')).toBeNull();
    const replay = await post();
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.json).toEqual(ran.json);
  });

  it('runs a request whose client dropped the connection mid-call to its end, so the retry creates nothing more', async () => {
    const user = await signUp(suite.call);
    const key = newKey();
    const body = JSON.stringify({ name: 'dropped' });
    const db = createDb(requireEnv('DATABASE_URL'), 'keys', 2);
    try {
      // New keys wait on this lock, so the connection is dropped while the call is running.
      const lock = await db.transaction();
      let request: http.ClientRequest | undefined;
      try {
        await lock.raw('LOCK TABLE api_keys IN SHARE ROW EXCLUSIVE MODE');
        request = http.request(`${suite.mesh.gatewayUrl}/v1/keys`, {
          method: 'POST',
          agent: false,
          headers: {
            authorization: `Bearer ${user.token}`,
            'content-type': 'application/json',
            'idempotency-key': key,
            'content-length': Buffer.byteLength(body),
          },
        });
        request.on('error', () => undefined);
        request.end(body);
        await eventually(async () => {
          const waiting = await db.raw(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE 'insert into "api_keys"%'`,
          );
          return waiting.rows[0].n > 0;
        }, 'the key insert waiting on the lock');
        request.destroy();
      } finally {
        await lock.commit();
      }
    } finally {
      await db.destroy();
    }
    const retry = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'dropped' }, headers: { 'idempotency-key': key } });
    expect(retry.status, retry.text).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    const keys = await suite.call('GET', '/v1/keys', { token: user.token });
    expect(keys.json.data.map((k: { key_id: string }) => k.key_id)).toEqual([retry.json.key.key_id]);
  });

  it('opens its bucket again when NATS has lost it', async () => {
    const user = await signUp(suite.call);
    const nc = await connect({ servers: suite.mesh.env.NATS_URL });
    try {
      await (await new Kvm(nc).open(`${suite.mesh.env.SWITCHBOARD_NAMESPACE}-idempotency`)).destroy();
    } finally {
      await nc.close();
    }
    const key = newKey();
    const created = await eventually(async () => {
      const response = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'after loss' }, headers: { 'idempotency-key': key } });
      if (response.status === 503) return undefined;
      return response;
    }, 'a POST with the header served again');
    expect(created.status, created.text).toBe(201);
    const replay = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'after loss' }, headers: { 'idempotency-key': key } });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect((await suite.call('GET', '/v1/keys', { token: user.token })).json.data).toHaveLength(1);
  });

  it('changes nothing without the header: two POSTs create two keys', async () => {
    const user = await signUp(suite.call);
    for (let i = 0; i < 2; i++) {
      const created = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'plain' } });
      expect(created.status).toBe(201);
      expect(created.headers.get('idempotent-replayed')).toBeNull();
    }
    expect((await suite.call('GET', '/v1/keys', { token: user.token })).json.data).toHaveLength(2);
  });
});
