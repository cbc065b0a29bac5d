import { eventually } from '@switchboard/runtime/testing';
import { type ApiResponse, createKey as createKeyAs, expectErrorBody, keyRecordFields, meshSuiteOfFile, signUp } from '@switchboard/testkit/mesh';
import { describe, expect, it } from 'vitest';

/**
 * API keys through REST (docs/api/keys.md#endpoints): every endpoint, the record, every refusal with its error body,
 * keys as credentials, and tenant isolation.
 */

const suite = meshSuiteOfFile();

const createKey = (token: string, body?: Record<string, unknown>) => createKeyAs(suite.call, token, body);

describe('creating and reading keys', () => {
  it('creates a key: 201 {full_key, key}, the key shown once and stored only as a hash', async () => {
    const owner = await signUp(suite.call);
    const response = await suite.call('POST', '/v1/keys', { token: owner.token, body: { name: '  Production  ', monthly_spend_cap_usd: '0.10' } });
    expect(response.status, response.text).toBe(201);
    expect(Object.keys(response.json).sort()).toEqual(['full_key', 'key']);
    const fullKey: string = response.json.full_key;
    expect(fullKey).toMatch(/^sb_[0-9A-Za-z]{49}$/);
    const key = response.json.key;
    expect(Object.keys(key).sort()).toEqual(keyRecordFields);
    expect(key).toMatchObject({
      key_id: expect.stringMatching(/^key_/),
      name: 'Production',
      hint: `sb_…${fullKey.slice(-4)}`,
      status: 'active',
      monthly_spend_cap_usd: '0.10',
      month_to_date_spend_usd: '0',
      alert_webhook_url: null,
      alert_threshold_pct: null,
      routing_policy: 'any',
      created_by: owner.userId,
      last_used_at: null,
      revoked_at: null,
    });
    expect(Date.parse(key.created_at)).not.toBeNaN();

    const got = await suite.call('GET', `/v1/keys/${key.key_id}`, { token: owner.token });
    expect(got.status).toBe(200);
    expect(got.json).toEqual(key);
    const listed = await suite.call('GET', '/v1/keys', { token: owner.token });
    expect(listed.status).toBe(200);
    expect(listed.json).toEqual({ data: [key], has_more: false, next_cursor: null });
    expect(listed.text).not.toContain(fullKey);
    expect(got.text).not.toContain(fullKey);
  });

  it('creates keys with a routing policy, and refuses an unknown one', async () => {
    const { token } = await signUp(suite.call);
    const { key } = await createKey(token, { name: 'cn', routing_policy: 'cn-only' });
    expect(key.routing_policy).toBe('cn-only');
    expectErrorBody(
      await suite.call('POST', '/v1/keys', { token, body: { name: 'x', routing_policy: 'mars-only' } }),
      400,
      'invalid_request',
      'routing_policy',
    );
  });

  it('names: 1..100 code points after trimming', async () => {
    const { token } = await signUp(suite.call);
    const hundredEmoji = '🔑'.repeat(100);
    expect((await createKey(token, { name: hundredEmoji })).key.name).toBe(hundredEmoji);
    for (const name of ['', '   ', '🔑'.repeat(101), 'a'.repeat(101)]) {
      expectErrorBody(await suite.call('POST', '/v1/keys', { token, body: { name } }), 400, 'invalid_request', 'name');
    }
    expectErrorBody(await suite.call('POST', '/v1/keys', { token, body: {} }), 400, 'invalid_request', 'name');
    expectErrorBody(await suite.call('POST', '/v1/keys', { token, body: { name: 5 } }), 400, undefined, 'name');
  });

  it('refuses caps that are not plain non-negative decimal strings, on create and on change', async () => {
    const { token } = await signUp(suite.call);
    const { key } = await createKey(token);
    for (const cap of ['abc', '-5', '', '1e3', '.5', '5.', '+5', ' 5', '5 ', '1,5', 'NaN', 'Infinity', '0x10']) {
      expectErrorBody(
        await suite.call('POST', '/v1/keys', { token, body: { name: 'c', monthly_spend_cap_usd: cap } }),
        400,
        'invalid_request',
        'monthly_spend_cap_usd',
      );
      expectErrorBody(
        await suite.call('PATCH', `/v1/keys/${key.key_id}/spend-cap`, { token, body: { monthly_spend_cap_usd: cap } }),
        400,
        'invalid_request',
        'monthly_spend_cap_usd',
      );
    }
    // A JSON number is not a decimal string.
    expectErrorBody(
      await suite.call('PATCH', `/v1/keys/${key.key_id}/spend-cap`, { token, body: { monthly_spend_cap_usd: 5 } }),
      400,
      undefined,
      'monthly_spend_cap_usd',
    );
    expectErrorBody(await suite.call('POST', '/v1/keys', { token, body: { name: 'c', monthly_spend_cap_usd: 5 } }), 400, undefined, 'monthly_spend_cap_usd');
    // Nothing changed.
    expect((await suite.call('GET', `/v1/keys/${key.key_id}`, { token })).json.monthly_spend_cap_usd).toBeNull();
  });

  it('lists newest first with cursors, filters by status, and checks limit and status', async () => {
    const { token } = await signUp(suite.call);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await createKey(token, { name: `k${i}` })).key.key_id as string);
    const first = await suite.call('GET', '/v1/keys?limit=2', { token });
    expect(first.json.data.map((k: { key_id: string }) => k.key_id)).toEqual([ids[4], ids[3]]);
    expect(first.json.has_more).toBe(true);
    const second = await suite.call('GET', `/v1/keys?limit=2&after=${first.json.next_cursor}`, { token });
    expect(second.json.data.map((k: { key_id: string }) => k.key_id)).toEqual([ids[2], ids[1]]);
    const third = await suite.call('GET', `/v1/keys?limit=2&after=${second.json.next_cursor}`, { token });
    expect(third.json).toMatchObject({ has_more: false, next_cursor: null });
    expect(third.json.data.map((k: { key_id: string }) => k.key_id)).toEqual([ids[0]]);

    expect((await suite.call('DELETE', `/v1/keys/${ids[1]}`, { token })).status).toBe(200);
    const revoked = await suite.call('GET', '/v1/keys?status=revoked', { token });
    expect(revoked.json.data.map((k: { key_id: string }) => k.key_id)).toEqual([ids[1]]);
    const active = await suite.call('GET', '/v1/keys?status=active&limit=100', { token });
    expect(active.json.data.map((k: { key_id: string }) => k.key_id)).toEqual([ids[4], ids[3], ids[2], ids[0]]);

    expectErrorBody(await suite.call('GET', '/v1/keys?status=expired', { token }), 400, 'invalid_request', 'status');
    expectErrorBody(await suite.call('GET', '/v1/keys?limit=0', { token }), 400, 'invalid_request', 'limit');
    expectErrorBody(await suite.call('GET', '/v1/keys?limit=101', { token }), 400, 'invalid_request', 'limit');
    expectErrorBody(await suite.call('GET', '/v1/keys?after=nonsense!', { token }), 400, 'invalid_request', 'after');
  });

  it('gives 50 parallel creations 50 distinct keys', async () => {
    const { token } = await signUp(suite.call);
    const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => suite.call('POST', '/v1/keys', { token, body: { name: `parallel ${i}` } })));
    expect(responses.map((r) => r.status)).toEqual(Array(50).fill(201));
    expect(new Set(responses.map((r) => r.json.full_key)).size).toBe(50);
    expect(new Set(responses.map((r) => r.json.key.key_id)).size).toBe(50);
    const listed = await suite.call('GET', '/v1/keys?limit=100', { token });
    expect(listed.json.data).toHaveLength(50);
  });
});

describe('changing keys', () => {
  it('renames, with the name rules', async () => {
    const { token } = await signUp(suite.call);
    const { key } = await createKey(token);
    const renamed = await suite.call('PATCH', `/v1/keys/${key.key_id}`, { token, body: { name: ' staging ' } });
    expect(renamed.status, renamed.text).toBe(200);
    expect(renamed.json).toMatchObject({ key_id: key.key_id, name: 'staging' });
    expectErrorBody(await suite.call('PATCH', `/v1/keys/${key.key_id}`, { token, body: { name: ' ' } }), 400, 'invalid_request', 'name');
  });

  it('sets a cap exactly as given, clears it, and refuses both or neither', async () => {
    const { token } = await signUp(suite.call);
    const { key } = await createKey(token);
    const path = `/v1/keys/${key.key_id}/spend-cap`;
    for (const cap of ['0.1', '0', '12.50', '100', '0.000000000001', '999999999999999']) {
      const response = await suite.call('PATCH', path, { token, body: { monthly_spend_cap_usd: cap } });
      expect(response.status, response.text).toBe(200);
      expect(response.json.monthly_spend_cap_usd).toBe(cap);
      expect((await suite.call('GET', `/v1/keys/${key.key_id}`, { token })).json.monthly_spend_cap_usd).toBe(cap);
    }
    const cleared = await suite.call('PATCH', path, { token, body: { clear: true } });
    expect(cleared.status).toBe(200);
    expect(cleared.json.monthly_spend_cap_usd).toBeNull();
    expectErrorBody(
      await suite.call('PATCH', path, { token, body: { monthly_spend_cap_usd: '5', clear: true } }),
      400,
      'invalid_request',
      'monthly_spend_cap_usd',
    );
    expectErrorBody(await suite.call('PATCH', path, { token, body: {} }), 400, 'invalid_request', 'monthly_spend_cap_usd');
    expectErrorBody(await suite.call('PATCH', path, { token, body: { clear: false } }), 400, 'invalid_request', 'monthly_spend_cap_usd');
    expectErrorBody(await suite.call('PATCH', path, { token }), 400, 'invalid_request', 'monthly_spend_cap_usd');
  });

  it('sets the alert webhook (HTTPS, threshold 1..100, default 80) with a signing secret shown once, and removes it', async () => {
    const { token } = await signUp(suite.call);
    const { key } = await createKey(token);
    const path = `/v1/keys/${key.key_id}/alert-webhook`;
    const set = await suite.call('PUT', path, { token, body: { url: 'https://alerts.example.com/hook' } });
    expect(set.status, set.text).toBe(200);
    expect(set.json).toMatchObject({ alert_webhook_url: 'https://alerts.example.com/hook', alert_threshold_pct: 80 });
    expect(set.json.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const again = await suite.call('GET', `/v1/keys/${key.key_id}`, { token });
    expect(again.json).not.toHaveProperty('signing_secret');
    expect(again.text).not.toContain(set.json.signing_secret);

    const fifty = await suite.call('PUT', path, { token, body: { url: 'https://alerts.example.com/other', threshold_pct: 50 } });
    expect(fifty.json).toMatchObject({ alert_threshold_pct: 50 });
    expect(fifty.json.signing_secret).not.toBe(set.json.signing_secret);

    for (const url of ['http://alerts.example.com/hook', 'not a url', '', 'https://', 'ftp://example.com/x', 'https://user:pw@example.com/x']) {
      expectErrorBody(await suite.call('PUT', path, { token, body: { url } }), 400, 'invalid_request', 'url');
    }
    for (const threshold of [0, 101, -1, 50.5]) {
      expectErrorBody(
        await suite.call('PUT', path, { token, body: { url: 'https://a.example.com', threshold_pct: threshold } }),
        400,
        undefined,
        'threshold_pct',
      );
    }
    expect((await suite.call('GET', `/v1/keys/${key.key_id}`, { token })).json).toMatchObject({
      alert_webhook_url: 'https://alerts.example.com/other',
      alert_threshold_pct: 50,
    });

    const removed = await suite.call('DELETE', path, { token });
    expect(removed.status).toBe(200);
    expect(removed.json).toMatchObject({ key_id: key.key_id, alert_webhook_url: null, alert_threshold_pct: null });
    expect(removed.json).not.toHaveProperty('signing_secret');
  });

  it('sets the routing policy (default any) and refuses unknown ones', async () => {
    const { token } = await signUp(suite.call);
    const { key } = await createKey(token);
    const path = `/v1/keys/${key.key_id}/routing-policy`;
    for (const policy of ['cn-only', 'overseas-only', 'any']) {
      const response = await suite.call('PUT', path, { token, body: { routing_policy: policy } });
      expect(response.status, response.text).toBe(200);
      expect(response.json.routing_policy).toBe(policy);
    }
    await suite.call('PUT', path, { token, body: { routing_policy: 'cn-only' } });
    expect((await suite.call('PUT', path, { token, body: {} })).json.routing_policy).toBe('any');
    for (const policy of ['CN-ONLY', 'eu-only', '']) {
      expectErrorBody(await suite.call('PUT', path, { token, body: { routing_policy: policy } }), 400, 'invalid_request', 'routing_policy');
    }
  });

  it('revokes (200 with the key, twice is fine); a revoked key cannot be changed', async () => {
    const { token } = await signUp(suite.call);
    const { key } = await createKey(token);
    const first = await suite.call('DELETE', `/v1/keys/${key.key_id}`, { token });
    expect(first.status, first.text).toBe(200);
    expect(first.json).toMatchObject({ key_id: key.key_id, status: 'revoked' });
    expect(Date.parse(first.json.revoked_at)).not.toBeNaN();
    const second = await suite.call('DELETE', `/v1/keys/${key.key_id}`, { token });
    expect(second.status).toBe(200);
    expect(second.json).toEqual(first.json);
    expectErrorBody(await suite.call('PATCH', `/v1/keys/${key.key_id}`, { token, body: { name: 'x' } }), 409, 'key_revoked', null);
    expectErrorBody(await suite.call('PATCH', `/v1/keys/${key.key_id}/spend-cap`, { token, body: { clear: true } }), 409, 'key_revoked');
  });
});

describe('keys as credentials', () => {
  it('authenticates REST calls as the creator in the key workspace, and records the use', async () => {
    const owner = await signUp(suite.call);
    const { fullKey, key } = await createKey(owner.token);
    const account = await suite.call('GET', '/v1/account', { token: fullKey });
    expect(account.status, account.text).toBe(200);
    expect(account.json.user_id).toBe(owner.userId);
    // The key lists the keys of its own workspace.
    const listed = await suite.call('GET', '/v1/keys', { token: fullKey });
    expect(listed.json.data.map((k: { key_id: string }) => k.key_id)).toEqual([key.key_id]);
    await eventually(async () => (await suite.call('GET', `/v1/keys/${key.key_id}`, { token: owner.token })).json.last_used_at, 'last_used_at');
    // Another workspace named in the header is refused (docs/conventions.md#workspaces).
    const other = await signUp(suite.call);
    expectErrorBody(await suite.call('GET', '/v1/keys', { token: fullKey, headers: { 'x-workspace-id': other.workspaceId } }), 403, 'workspace_mismatch');
  });

  it('refuses unknown, malformed and wrong-checksum keys with 401', async () => {
    const { fullKey } = await createKey((await signUp(suite.call)).token);
    const flipped = `${fullKey.slice(0, 10)}${fullKey[10] === 'a' ? 'b' : 'a'}${fullKey.slice(11)}`;
    for (const credential of ['sb_nothing', flipped, `${fullKey}x`, fullKey.slice(0, -1)]) {
      const refused = await suite.call('GET', '/v1/account', { token: credential });
      expectErrorBody(refused, 401, 'invalid_api_key');
      // An audit line with the request id and the client's address, never the credential.
      const line = await eventually(
        () =>
          suite.mesh
            .output('gateway')
            .split('\n')
            .find((l) => l.includes(refused.headers.get('x-request-id')!) && l.includes('"audit":true')),
        'the audit line',
      );
      expect(JSON.parse(line)).toMatchObject({
        event: 'authentication.api_key',
        outcome: 'failure',
        reason: 'invalid_api_key',
        ip: expect.stringContaining('127.0.0.1'),
      });
      expect(line).not.toContain(credential);
    }
  });

  it('refuses a revoked key within one second, with 401 everywhere', async () => {
    const { token } = await signUp(suite.call);
    const { fullKey, key } = await createKey(token);
    expect((await suite.call('GET', '/v1/keys', { token: fullKey })).status).toBe(200);
    expect((await suite.call('DELETE', `/v1/keys/${key.key_id}`, { token })).status).toBe(200);
    const revokedAt = Date.now();
    const refused = await eventually(
      async () => {
        const response = await suite.call('GET', '/v1/keys', { token: fullKey });
        return response.status === 401 ? response : undefined;
      },
      'the revoked key to be refused',
      1000,
      10,
    );
    expect(Date.now() - revokedAt).toBeLessThan(1000);
    expectErrorBody(refused, 401, 'api_key_revoked');
  });

  it('blocks a key whose cap is reached with 402 and the metadata, and unblocks it at once when the cap is raised or cleared', async () => {
    const { token } = await signUp(suite.call);
    const { fullKey, key } = await createKey(token, { name: 'capped', monthly_spend_cap_usd: '0' });
    const blocked = await suite.call('GET', '/v1/account', { token: fullKey });
    expectErrorBody(blocked, 402, 'spend_cap_exceeded', null);
    const now = new Date();
    expect(blocked.json.error.metadata).toEqual({
      scope: 'key',
      period: 'month',
      cap_usd: '0',
      spend_usd: '0',
      resets_at: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString(),
    });
    expect(blocked.text).not.toContain(fullKey);
    const raised = await suite.call('PATCH', `/v1/keys/${key.key_id}/spend-cap`, { token, body: { monthly_spend_cap_usd: '5' } });
    expect(raised.status).toBe(200);
    expect((await suite.call('GET', '/v1/account', { token: fullKey })).status).toBe(200);
    await suite.call('PATCH', `/v1/keys/${key.key_id}/spend-cap`, { token, body: { monthly_spend_cap_usd: '0' } });
    expectErrorBody(await suite.call('GET', '/v1/account', { token: fullKey }), 402, 'spend_cap_exceeded');
    await suite.call('PATCH', `/v1/keys/${key.key_id}/spend-cap`, { token, body: { clear: true } });
    expect((await suite.call('GET', '/v1/account', { token: fullKey })).status).toBe(200);
  });
});

describe('tenant isolation', () => {
  it("answers 404 for another workspace's key on every call, and leaves it as it was", async () => {
    const owner = await signUp(suite.call);
    const stranger = await signUp(suite.call);
    const { key } = await createKey(owner.token, { name: 'mine', monthly_spend_cap_usd: '3' });
    const id = key.key_id as string;
    const attempts: Array<[string, string, unknown?]> = [
      ['GET', `/v1/keys/${id}`],
      ['PATCH', `/v1/keys/${id}`, { name: 'theirs' }],
      ['PATCH', `/v1/keys/${id}/spend-cap`, { clear: true }],
      ['PATCH', `/v1/keys/${id}/spend-cap`, { monthly_spend_cap_usd: 'abc' }],
      ['PUT', `/v1/keys/${id}/alert-webhook`, { url: 'https://evil.example.com' }],
      ['DELETE', `/v1/keys/${id}/alert-webhook`],
      ['PUT', `/v1/keys/${id}/routing-policy`, { routing_policy: 'cn-only' }],
      ['DELETE', `/v1/keys/${id}`],
    ];
    const responses: ApiResponse[] = [];
    for (const [method, path, body] of attempts) responses.push(await suite.call(method, path, { token: stranger.token, body }));
    for (const response of responses) {
      expectErrorBody(response, 404, 'key_not_found', null);
      expect(response.text).not.toContain('mine');
    }
    const missing = await suite.call('GET', '/v1/keys/key_doesnotexist', { token: stranger.token });
    expect({ ...missing.json.error, request_id: null }).toEqual({ ...responses[0].json.error, request_id: null });
    expect((await suite.call('GET', '/v1/keys', { token: stranger.token })).json.data).toEqual([]);
    expect((await suite.call('GET', `/v1/keys/${id}`, { token: owner.token })).json).toEqual(key);
  });
});

describe('secrets stay out of logs', () => {
  it('never logs a full key or an alert signing secret', async () => {
    const { token } = await signUp(suite.call);
    const { fullKey, key } = await createKey(token);
    await suite.call('GET', '/v1/account', { token: fullKey });
    const secret = (await suite.call('PUT', `/v1/keys/${key.key_id}/alert-webhook`, { token, body: { url: 'https://a.example.com/h' } })).json.signing_secret;
    for (const component of ['gateway', 'keys', 'identity'] as const) {
      expect(suite.mesh.output(component)).not.toContain(fullKey);
      expect(suite.mesh.output(component)).not.toContain(fullKey.slice(3, 46));
      expect(suite.mesh.output(component)).not.toContain(secret);
    }
  });
});
