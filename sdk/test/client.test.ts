import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createDb } from '@switchboard/runtime/db';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { DataKeyRing } from '@switchboard/runtime/secrets';
import { eventually } from '@switchboard/runtime/testing';
import { tokenOf, waitForMail } from '@switchboard/testkit/mailbox';
import { bootMesh, newUser } from '@switchboard/testkit/mesh';
import { decodeJwt, importJWK, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  AuthenticationError,
  ConflictError,
  createSwitchboardClient,
  isSwitchboardError,
  NotFoundError,
  PermissionDeniedError,
  paginate,
  type Session,
  type SwitchboardClient,
  SwitchboardError,
} from '../src/index.js';

/** The SDK against the booted mesh: typed reads, typed errors, token refresh, pagination, API keys. */

let mesh: Mesh;

beforeAll(async () => {
  mesh = await bootMesh();
});

afterAll(async () => {
  await mesh?.stop();
});

const client = (options: Partial<Parameters<typeof createSwitchboardClient>[0]> = {}) => createSwitchboardClient({ baseUrl: mesh.gatewayUrl, ...options });

/** A new account, registered through the SDK; the client holds its session. */
async function registered(): Promise<{ sb: SwitchboardClient; email: string; password: string; userId: string; session: Session }> {
  const sb = client();
  const user = newUser();
  const answer = await sb.register(user);
  return { sb, email: user.email, password: user.password, userId: answer.user!.user_id, session: answer.session! };
}

/** The SwitchboardError a call rejects with. */
async function failure(call: Promise<unknown>): Promise<SwitchboardError> {
  const outcome = await call.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(outcome instanceof SwitchboardError)) throw new Error(`expected a SwitchboardError, got ${String(outcome)}`);
  return outcome;
}

/**
 * An access token of `session` that expired an hour ago, signed with identity's active key: the
 * access-token lifetime is fixed at 15 minutes (no setting shortens it), so this is how a test gets
 * a genuinely expired token of a live session without waiting.
 */
async function expiredAccessToken(session: Session): Promise<string> {
  const db = createDb(mesh.env.DATABASE_URL, 'identity', 1);
  try {
    const row = await db('signing_keys').where({ status: 'active' }).first();
    const jwk = JSON.parse(DataKeyRing.parse(mesh.env.SWITCHBOARD_DATA_KEYS).decrypt(row.private_jwk_encrypted, 'identity.signing-key'));
    const claims = decodeJwt(session.access_token);
    const expiredAt = Math.floor(Date.now() / 1000) - 3600;
    return await new SignJWT({ sid: claims.sid, aal: claims.aal })
      .setProtectedHeader({ alg: 'ES256', kid: row.kid, typ: 'JWT' })
      .setSubject(claims.sub!)
      .setIssuer(claims.iss!)
      .setAudience(claims.aud!)
      .setIssuedAt(expiredAt - 900)
      .setExpirationTime(expiredAt)
      .setJti(randomBytes(16).toString('base64url'))
      .sign(await importJWK(jwk, 'ES256'));
  } finally {
    await db.destroy();
  }
}

describe('typed calls', () => {
  it('registers, reads the typed account, and verifies the address with the mailed token (204)', async () => {
    const { sb, email, userId } = await registered();
    const account = await sb.get('/v1/account');
    expect(account).toMatchObject({ user_id: userId, email, email_verified: false, two_factor_enabled: false });
    expect(account.personal_workspace_id).toMatch(/^org_/);

    const token = tokenOf(await waitForMail(mesh.env.MAILBOX_DIR, email, 'email_verification'));
    await expect(sb.post('/v1/auth/verify-email', { body: { token } })).resolves.toBeUndefined();
    expect((await sb.get('/v1/account')).email_verified).toBe(true);
  });

  it('signs in with email and password, and the raw client answers {data, response}', async () => {
    const { email, password } = await registered();
    const sb = client();
    const answer = await sb.signIn({ email, password });
    expect(answer.session?.token_type).toBe('Bearer');
    expect(sb.credentials().accessToken).toBe(answer.session?.access_token);
    const { data, error, response } = await sb.raw.GET('/v1/account');
    expect(error).toBeUndefined();
    expect(response.status).toBe(200);
    expect(data?.email).toBe(email);
  });
});

describe('errors', () => {
  it('throws a SwitchboardError with the contract error body on a bad login', async () => {
    const { email } = await registered();
    const sb = client();
    const error = await failure(sb.signIn({ email, password: 'not the password at all' }));
    expect(error).toBeInstanceOf(Error);
    expect(isSwitchboardError(error, 'invalid_credentials')).toBe(true);
    expect(error).toBeInstanceOf(AuthenticationError);
    expect(error).toMatchObject({ name: 'AuthenticationError', status: 401, code: 'invalid_credentials', field: null, metadata: {}, retryAfter: null });
    expect(error.message).toEqual(expect.any(String));
    expect(error.requestId).toBeTruthy();
    expect(sb.credentials().accessToken).toBeUndefined();

    // The raw client returns the same body as `error`, with the request id of the header.
    const { error: body, response } = await sb.raw.POST('/v1/auth/login', { body: { email, password: 'still wrong' } });
    expect(response.status).toBe(401);
    expect(body?.error).toMatchObject({ code: 'invalid_credentials', field: null, request_id: response.headers.get('x-request-id') });
  });

  it('carries the field of a validation error, and the workspace header of the client', async () => {
    const { session } = await registered();
    const sb = client({ accessToken: session.access_token });
    const invalid = await failure(sb.post('/v1/keys', { body: { name: '   ' } }));
    expect(invalid).toMatchObject({ status: 400, code: 'invalid_request', field: 'name' });

    const elsewhere = client({ accessToken: session.access_token, workspaceId: 'org_notmine' });
    expect(await failure(elsewhere.get('/v1/account'))).toMatchObject({ status: 404, code: 'workspace_not_found' });
  });
});

describe('token refresh', () => {
  it('renews an expired access token once for concurrent calls, replays their bodies, and reports the session', async () => {
    const { session, userId } = await registered();
    const expired = await expiredAccessToken(session);
    // The gateway refuses the forged token as expired, not as invalid.
    const refused = await failure(client({ accessToken: expired }).get('/v1/account'));
    expect(refused).toMatchObject({ status: 401, code: 'token_expired' });

    const onSession = vi.fn<(session: Session) => void>();
    const sb = client({ accessToken: expired, refreshToken: session.refresh_token, onSession });
    const [accounts, created] = await Promise.all([
      Promise.all(Array.from({ length: 4 }, () => sb.get('/v1/account'))),
      Promise.all(['one', 'two'].map((name) => sb.post('/v1/keys', { body: { name } }))),
    ]);
    for (const account of accounts) expect(account.user_id).toBe(userId);
    expect(created.map((answer) => answer.key!.name).sort()).toEqual(['one', 'two']);

    expect(onSession).toHaveBeenCalledTimes(1);
    const renewed = onSession.mock.calls[0][0];
    expect(renewed.access_token).not.toBe(expired);
    expect(renewed.refresh_token).not.toBe(session.refresh_token);
    expect(sb.credentials()).toMatchObject({ accessToken: renewed.access_token, refreshToken: renewed.refresh_token });
    // Same session, renewed: the new access token belongs to the session of the old one.
    expect(decodeJwt(renewed.access_token).sid).toBe(decodeJwt(session.access_token).sid);
    const keys = await sb.get('/v1/keys');
    expect(keys.data).toHaveLength(2);
  });

  it('refreshes only on token_expired: other 401s are thrown as they are', async () => {
    const { session } = await registered();
    const onSession = vi.fn();
    const sb = client({ accessToken: 'not-a-jwt', refreshToken: session.refresh_token, onSession });
    expect(await failure(sb.get('/v1/account'))).toMatchObject({ status: 401, code: 'invalid_token' });
    expect(onSession).not.toHaveBeenCalled();
    expect(sb.credentials().refreshToken).toBe(session.refresh_token);
  });

  it('answers with the refresh error when the session cannot be renewed, and forgets the dead tokens', async () => {
    const { session } = await registered();
    const expired = await expiredAccessToken(session);
    const onSession = vi.fn();
    const sb = client({ accessToken: expired, refreshToken: 'unknown-refresh-token', onSession });
    const error = await failure(sb.get('/v1/account'));
    expect(error).toMatchObject({ status: 401, code: 'invalid_token' });
    expect(error.requestId).toBeTruthy();
    expect(onSession).not.toHaveBeenCalled();
    expect(sb.credentials()).toEqual({ accessToken: undefined, refreshToken: undefined, apiKey: undefined });
  });

  it('signs out: the tokens are forgotten and the old access token is refused', async () => {
    const { sb, session } = await registered();
    await sb.auth.logout();
    expect(sb.credentials()).toEqual({ accessToken: undefined, refreshToken: undefined, apiKey: undefined });
    const old = client({ accessToken: session.access_token });
    await eventually(async () => (await failure(old.get('/v1/account'))).code === 'session_revoked', 'the revocation to reach the gateway');
  });

  it('refreshes on demand, and a client without a refresh token does not try', async () => {
    const { session } = await registered();
    const onSession = vi.fn();
    const sb = client({ accessToken: session.access_token, refreshToken: session.refresh_token, onSession });
    const renewed = await sb.refresh();
    expect(onSession).toHaveBeenCalledWith(renewed);
    expect((await sb.get('/v1/account')).email).toContain('@example.com');

    const expired = await expiredAccessToken(renewed);
    expect(await failure(client({ accessToken: expired }).get('/v1/account'))).toMatchObject({ code: 'token_expired' });
  });
});

describe('pagination and API keys', () => {
  it('walks every page of keys with limit=2, then calls with one of the keys', async () => {
    const { sb, userId } = await registered();
    const created: string[] = [];
    for (const name of ['k1', 'k2', 'k3', 'k4', 'k5']) created.push((await sb.post('/v1/keys', { body: { name } })).key!.key_id);

    const fetchPage = vi.fn((after: string | undefined) => sb.get('/v1/keys', { params: { query: { limit: 2, after } } }));
    const keys = await paginate(fetchPage).collect();
    expect(keys.map((key) => key.key_id).sort()).toEqual([...created].sort());
    expect(fetchPage).toHaveBeenCalledTimes(3);
    expect(fetchPage.mock.calls[0][0]).toBeUndefined();
    expect(typeof fetchPage.mock.calls[1][0]).toBe('string');

    const sizes: number[] = [];
    for await (const page of paginate(fetchPage).pages()) sizes.push(page.data.length);
    expect(sizes).toEqual([2, 2, 1]);

    const names: string[] = [];
    for await (const key of paginate(fetchPage)) names.push(key.name);
    expect(names.sort()).toEqual(['k1', 'k2', 'k3', 'k4', 'k5']);

    // The full key is shown once, at creation; a client with it acts as the user.
    const { full_key: fullKey } = await sb.post('/v1/keys', { body: { name: 'backend' } });
    const withKey = client({ apiKey: fullKey });
    expect((await withKey.get('/v1/account')).user_id).toBe(userId);
    expect((await withKey.get('/v1/keys', { params: { query: { limit: 100 } } })).data).toHaveLength(6);
    const refused = await failure(withKey.post('/v1/organizations', { body: { name: 'Acme' } }));
    expect(refused).toMatchObject({ status: 403, code: 'user_session_required' });
  });
});

describe('resources', () => {
  it('creates, lists across pages, reads, renames and revokes keys', async () => {
    const { sb } = await registered();
    const created = [];
    for (const name of ['r1', 'r2', 'r3']) created.push(await sb.keys.create({ name, monthly_spend_cap_usd: '5.00' }));
    expect(created[0]).toMatchObject({ full_key: expect.stringMatching(/^sb_/), key: { name: 'r1', monthly_spend_cap_usd: '5.00', status: 'active' } });

    const names: string[] = [];
    for await (const key of sb.keys.list({ limit: 2 })) names.push(key.name);
    // Newest first, across two pages.
    expect(names).toEqual(['r3', 'r2', 'r1']);
    const first = await sb.keys.list({ limit: 2 }).firstPage();
    expect(first).toMatchObject({ has_more: true, next_cursor: expect.any(String) });

    const keyId = created[0].key!.key_id;
    expect((await sb.keys.retrieve(keyId)).name).toBe('r1');
    expect((await sb.keys.update(keyId, { name: 'renamed' })).name).toBe('renamed');
    expect((await sb.keys.revoke(keyId)).status).toBe('revoked');
    expect((await sb.keys.list({ status: 'revoked' }).collect()).map((key) => key.key_id)).toEqual([keyId]);
    await expect(sb.keys.update(keyId, { name: 'again' })).rejects.toBeInstanceOf(ConflictError);
    await expect(sb.keys.retrieve('key_doesnotexist')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('tops up once per idempotency key, and works with conversations, organizations and webhooks', async () => {
    const { sb } = await registered();
    const topup = await sb.billing.topup({ amount_usd: '5.00' });
    expect(topup).toMatchObject({ checkout_id: expect.stringMatching(/^chk_/), amount_usd: '5.00' });
    const again = await sb.billing.topup({ amount_usd: '5.00', idempotency_key: 'order-1' });
    expect((await sb.billing.topup({ amount_usd: '5', idempotency_key: 'order-1' })).checkout_id).toBe(again.checkout_id);
    expect((await sb.billing.topups().collect()).map((t) => t.checkout_id).sort()).toEqual([topup.checkout_id, again.checkout_id].sort());
    expect((await sb.billing.balance()).currency).toBe('USD');

    const conversation = await sb.conversations.create({ title: 'hello' });
    await sb.conversations.messages.create(conversation.conversation_id, { role: 'user', content: 'hi' });
    expect((await sb.conversations.messages.list(conversation.conversation_id).collect()).map((m) => m.content)).toEqual(['hi']);
    await sb.conversations.delete(conversation.conversation_id);
    await expect(sb.conversations.retrieve(conversation.conversation_id)).rejects.toMatchObject({ status: 404 });

    const { organization } = await sb.organizations.create({ name: 'Acme' });
    const orgId = organization!.org_id;
    expect((await sb.organizations.members.list(orgId).collect()).map((member) => member.role)).toEqual(['owner']);
    const webhook = await sb.webhooks.create(orgId, { url: 'https://hooks.example.com/switchboard', events: ['key.created'] });
    expect(webhook.secret).toMatch(/^whsec_/);
    expect((await sb.webhooks.list(orgId).collect()).map((w) => w.webhook_id)).toEqual([webhook.webhook_id]);
    // A key acts in its own workspace: the organization's keys are made with the workspace option.
    const orgKey = await sb.keys.create({ name: 'in acme' }, { workspaceId: orgId });
    expect((await sb.keys.list({}, { workspaceId: orgId }).collect()).map((key) => key.key_id)).toEqual([orgKey.key!.key_id]);
    const withKey = client({ apiKey: orgKey.full_key });
    await expect(withKey.organizations.create({ name: 'Other' })).rejects.toBeInstanceOf(PermissionDeniedError);
    await sb.webhooks.delete(orgId, webhook.webhook_id);
  });
});

describe('idempotent retries on the real path', () => {
  /**
   * A proxy in front of the gateway that lets the chosen requests reach it but loses their
   * answers (the connection is closed once the gateway has answered), as a network failure after
   * the work is done would.
   */
  async function lossyProxy(loseAnswer: (method: string, url: string) => boolean) {
    const forwarded: Array<{ method: string; url: string; status: number; idempotencyKey?: string; replayed: string | null }> = [];
    let lost = false;
    const server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const headers = new Headers();
      for (const [name, value] of Object.entries(req.headers as IncomingHttpHeaders)) {
        if (typeof value === 'string' && !['host', 'connection', 'content-length'].includes(name)) headers.set(name, value);
      }
      const method = req.method ?? 'GET';
      const url = req.url ?? '/';
      const body = chunks.length ? Buffer.concat(chunks) : undefined;
      const upstream = await fetch(`${mesh.gatewayUrl}${url}`, { method, headers, body });
      const answer = Buffer.from(await upstream.arrayBuffer());
      forwarded.push({
        method,
        url,
        status: upstream.status,
        idempotencyKey: req.headers['idempotency-key'] as string | undefined,
        replayed: upstream.headers.get('idempotent-replayed'),
      });
      if (!lost && loseAnswer(method, url)) {
        lost = true;
        req.socket.destroy();
        return;
      }
      const out: Record<string, string> = {};
      upstream.headers.forEach((value, name) => {
        if (!['content-length', 'transfer-encoding', 'content-encoding', 'connection'].includes(name)) out[name] = value;
      });
      res.writeHead(upstream.status, out).end(answer);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      forwarded,
      close: () => {
        server.closeAllConnections();
        return new Promise((resolve) => server.close(resolve));
      },
    };
  }

  // Needs the gateway's Idempotency-Key (docs/conventions.md#idempotency): without it the retry creates a second key.
  it('creates one key when the answer to the first POST is lost and the SDK sends it again', async () => {
    const { session } = await registered();
    const proxy = await lossyProxy((method, url) => method === 'POST' && url === '/v1/keys');
    try {
      const sb = createSwitchboardClient({ baseUrl: proxy.url, accessToken: session.access_token, backoff: { sleep: async () => {} } });
      const created = await sb.keys.create({ name: 'exactly once' });
      const posts = proxy.forwarded.filter((f) => f.method === 'POST');
      expect(posts).toHaveLength(2);
      expect(posts[0].idempotencyKey).toBeTruthy();
      expect(posts[1].idempotencyKey).toBe(posts[0].idempotencyKey);
      expect(posts.map((p) => [p.status, p.replayed])).toEqual([
        [201, null],
        [201, 'true'],
      ]);
      const keys = await client({ accessToken: session.access_token }).keys.list().collect();
      expect(keys.map((key) => key.key_id)).toEqual([created.key!.key_id]);
    } finally {
      await proxy.close();
    }
  });
});
