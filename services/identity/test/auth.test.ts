import { Code, ConnectError } from '@connectrpc/connect';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { AccountService, AuthService, OrganizationService } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { createDb, type Knex } from '@switchboard/runtime/db';
import { toHttpError } from '@switchboard/runtime/errors';
import { DataKeyRing, sha256Hex } from '@switchboard/runtime/secrets';
import { linksOf, mailsTo, tokenOf } from '@switchboard/testkit/mailbox';
import argon2 from 'argon2';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, meshClient, type RunningIdentity, requireEnv, startIdentity, uniqueEmail } from './helpers.js';

const password = 'correct horse battery staple';

/** The error a call failed with (fails the test when it succeeded). */
async function failure(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error('expected the call to fail');
}

/** The m, t and p parameters of an argon2 PHC string. */
function argon2Parameters(hash: string): Record<string, string> {
  return Object.fromEntries(
    hash
      .split('$')[3]
      .split(',')
      .map((pair) => pair.split('=')),
  );
}

/** Public code, field and HTTP status of a failed call, as the gateway would render them. */
async function httpFailure(promise: Promise<unknown>) {
  const err = await failure(promise);
  const { status, body } = toHttpError(err, 'req_test');
  return { status, code: body.error.code, field: body.error.field, message: body.error.message, body, err };
}

describe('identity: registration, login, tokens', () => {
  let service: RunningIdentity;
  let db: Knex;
  let auth: ReturnType<typeof meshClient<typeof AuthService>>;
  let orgs: ReturnType<typeof meshClient<typeof OrganizationService>>;
  /** Every secret the service saw or handed out: none may appear in its log. */
  const secrets: string[] = [];

  const accountAs = (userId: string) => meshClient(AccountService, service.baseUrl, { caller: 'gateway', principalId: userId, principalType: 'user' });

  async function register(email = uniqueEmail(), fullName?: string) {
    secrets.push(password);
    const response = await auth.register({ email, password, fullName });
    secrets.push(response.session!.accessToken, response.session!.refreshToken);
    return response;
  }

  beforeAll(async () => {
    // Mailed links are built on it (its trailing slash dropped).
    service = await startIdentity({ env: { PUBLIC_BASE_URL: 'https://switchboard.example/' } });
    db = createDb(requireEnv('DATABASE_URL'), 'identity', 2);
    auth = meshClient(AuthService, service.baseUrl);
    orgs = meshClient(OrganizationService, service.baseUrl);
  });

  afterAll(async () => {
    await service?.stop();
    await db?.destroy();
  });

  it('registers an account with its personal workspace, a session and events', async () => {
    const email = uniqueEmail('ada');
    const { user, session } = await register(`  ${email.toUpperCase()} `, 'Ada Lovelace');
    expect(user).toMatchObject({ email, emailVerified: false, fullName: 'Ada Lovelace', twoFactorEnabled: false });
    expect(user!.userId).toMatch(/^usr_[0-9A-Za-z]{22}$/);
    expect(user!.personalWorkspaceId).toMatch(/^org_[0-9A-Za-z]{22}$/);
    expect(Math.abs(Number(user!.createdAt!.seconds) * 1000 - Date.now())).toBeLessThan(60_000);
    expect(session).toMatchObject({ tokenType: 'Bearer', expiresIn: 900 });
    expect(Buffer.from(session!.refreshToken, 'base64url').length).toBeGreaterThanOrEqual(16);

    const org = await db('organizations').where({ id: user!.personalWorkspaceId }).first();
    expect(org).toMatchObject({ personal: true, name: "Ada Lovelace's workspace" });
    expect(await db('memberships').where({ org_id: org.id })).toEqual([expect.objectContaining({ user_id: user!.userId, role: 'owner' })]);

    const me = await accountAs(user!.userId).getAccount({});
    expect(me).toMatchObject({ userId: user!.userId, email, personalWorkspaceId: user!.personalWorkspaceId, fullName: 'Ada Lovelace' });

    // Refresh token stored only as its hash, attached to the session named in the access token.
    const stored = await db('refresh_tokens')
      .where({ token_hash: sha256Hex(session!.refreshToken) })
      .first();
    expect(stored).toBeDefined();
    const sessionRow = await db('sessions').where({ id: stored.session_id }).first();
    expect(sessionRow).toMatchObject({ user_id: user!.userId, revoked_at: null, aal: 'aal1' });
    const lifetimeDays = (sessionRow.expires_at.getTime() - sessionRow.created_at.getTime()) / 86_400_000;
    expect(lifetimeDays).toBeCloseTo(30, 1);

    // Outbox rows written with the account, and published to JetStream by the relay.
    const rows = await db('outbox')
      .whereRaw("payload->'data'->>'user_id' = ? OR payload->'data'->>'owner_user_id' = ?", [user!.userId, user!.userId])
      .orderBy('id');
    expect(rows.map((row) => row.payload.type)).toEqual(['user.registered', 'organization.created', 'organization.member.added']);
    expect(rows[0].payload).toMatchObject({
      type: 'user.registered',
      producer: 'identity',
      data: { user_id: user!.userId, personal_workspace_id: user!.personalWorkspaceId },
    });
    expect(rows[0].subject).toBe(`${requireEnv('EVENTS_SUBJECT_PREFIX')}.user.registered`);
    expect(rows[2].payload).toMatchObject({ workspace_id: org.id, data: { org_id: org.id, user_id: user!.userId, role: 'owner' } });
    await eventually(
      async () =>
        (
          await db('outbox')
            .whereIn(
              'id',
              rows.map((row) => row.id),
            )
            .whereNull('published_at')
        ).length === 0
          ? true
          : undefined,
      'the outbox relay to publish the registration events',
    );
  });

  it('names the personal workspace after the email local part without a full name', async () => {
    const email = uniqueEmail('noname');
    const { user } = await register(email);
    expect(user!.fullName).toBeUndefined();
    const org = await db('organizations').where({ id: user!.personalWorkspaceId }).first();
    expect(org.name).toBe(`${email.split('@')[0]}'s workspace`);
  });

  it('mails a verification token (hashed in the database, valid 24 h) and its link as an .eml file; redeeming it emits user.email_verified once', async () => {
    const email = uniqueEmail('mail');
    const { user } = await register(email, 'Mail Tester');
    const [mail] = await eventually(async () => {
      const mails = await mailsTo(service.mailboxDir, email);
      return mails.length > 0 ? mails : undefined;
    }, 'the verification mail');
    expect(mail.file).toMatch(/^\d{8}T\d{6}\.\d{3}Z-\d{6}-[0-9a-f]{8}\.eml$/);
    expect(mail.headers.subject).toBe('Confirm your email address');
    expect(mail.headers['x-switchboard-mail-kind']).toBe('email_verification');
    expect(mail.headers['message-id']).toMatch(/^<.+@.+>$/);
    expect(mail.headers.date).toMatch(/^\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} \+0000$/);
    expect(mail.headers['content-type']).toMatch(/^multipart\/alternative; boundary=/);
    const token = tokenOf(mail);
    // The link to the dashboard's page, in both parts, the token in its fragment.
    const link = `https://switchboard.example/app/verify-email#token=${token}`;
    expect(linksOf(mail)).toEqual({ text: [link], html: [link] });
    secrets.push(token);
    const row = await db('email_verifications')
      .where({ token_hash: sha256Hex(token) })
      .first();
    expect(row).toMatchObject({ user_id: user!.userId, email, used_at: null });
    const hours = (row.expires_at.getTime() - row.created_at.getTime()) / 3_600_000;
    expect(hours).toBeCloseTo(24, 1);
    expect(JSON.stringify(await db('email_verifications').where({ user_id: user!.userId }))).not.toContain(token);

    // Redeemed: user.email_verified in the same transaction (billing grants the free credit on it); a second try emits nothing.
    await auth.verifyEmail({ token: token });
    expect((await failure(auth.verifyEmail({ token: token }))).code).toBe(Code.InvalidArgument);
    const events = await db('outbox')
      .whereRaw("payload->>'type' = 'user.email_verified' AND payload->'data'->>'user_id' = ?", [user!.userId])
      .select('payload');
    expect(events.map((event) => event.payload)).toEqual([
      expect.objectContaining({
        workspace_id: user!.personalWorkspaceId,
        producer: 'identity',
        data: { user_id: user!.userId, personal_workspace_id: user!.personalWorkspaceId, verified_at: expect.any(String) },
      }),
    ]);
  });

  it('orders mailbox file names by time', async () => {
    const emails = [uniqueEmail('order1'), uniqueEmail('order2')];
    for (const email of emails) await register(email);
    const names = await eventually(async () => {
      const found = await Promise.all(emails.map((email) => mailsTo(service.mailboxDir, email)));
      return found.every((mails) => mails.length === 1) ? found.map((mails) => mails[0].file) : undefined;
    }, 'both mails');
    expect([...names].sort()).toEqual(names);
  });

  it('signs ES256 access tokens that verify against the JWKS with exactly the agreed claims', async () => {
    const { user, session } = await register();
    const jwks = await auth.getJwks({});
    expect(jwks.keys.length).toBeGreaterThanOrEqual(1);
    for (const key of jwks.keys) {
      expect(key).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
      expect(key.x).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(key.y).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(Object.keys(key)).not.toContain('d');
    }
    const keySet = createLocalJWKSet({
      keys: jwks.keys.map((key) => ({ kty: key.kty, crv: key.crv, x: key.x, y: key.y, kid: key.kid, alg: key.alg, use: key.use })),
    });
    const { payload, protectedHeader } = await jwtVerify(session!.accessToken, keySet, {
      algorithms: ['ES256'],
      issuer: 'switchboard',
      audience: 'switchboard-api',
    });
    expect(protectedHeader.alg).toBe('ES256');
    expect(jwks.keys.map((key) => key.kid)).toContain(protectedHeader.kid);
    expect(Object.keys(payload).sort()).toEqual(['aal', 'aud', 'exp', 'iat', 'iss', 'jti', 'sid', 'sub']);
    expect(payload).toMatchObject({ sub: user!.userId, aal: 'aal1', iss: 'switchboard', aud: 'switchboard-api' });
    expect(payload.exp! - payload.iat!).toBe(900);
    expect(Math.abs(payload.iat! * 1000 - Date.now())).toBeLessThan(60_000);
    expect(payload.sid).toMatch(/^ses_/);
    expect(await db('sessions').where({ id: payload.sid, user_id: user!.userId }).first()).toBeDefined();
    expect(typeof payload.jti).toBe('string');

    // A second login gets another session and another jti.
    const again = await auth.login({ email: user!.email, password });
    secrets.push(again.session!.accessToken, again.session!.refreshToken);
    const second = await jwtVerify(again.session!.accessToken, keySet, { issuer: 'switchboard', audience: 'switchboard-api' });
    expect(second.payload.sid).not.toBe(payload.sid);
    expect(second.payload.jti).not.toBe(payload.jti);
  });

  it('stores exactly one active signing key, its private JWK encrypted', async () => {
    const keys = await db('signing_keys').select();
    expect(keys.filter((key) => key.status === 'active')).toHaveLength(1);
    const [active] = keys.filter((key) => key.status === 'active');
    expect(active.private_jwk_encrypted).toMatch(/^v2\.test1\./);
    expect(() => JSON.parse(active.private_jwk_encrypted)).toThrow();
    expect(active.private_jwk_encrypted).not.toContain('"d"');
    const dataKeys = DataKeyRing.parse(requireEnv('SWITCHBOARD_DATA_KEYS'));
    const privateJwk = JSON.parse(dataKeys.decrypt(active.private_jwk_encrypted, 'identity.signing-key'));
    expect(privateJwk).toMatchObject({ kty: 'EC', crv: 'P-256', x: active.public_jwk.x, y: active.public_jwk.y, kid: active.kid });
    expect(privateJwk.d).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(active.private_jwk_encrypted).not.toContain(privateJwk.d);
    expect(() => dataKeys.decrypt(active.private_jwk_encrypted, 'identity.other-purpose')).toThrow();
    const header = decodeProtectedHeader((await register()).session!.accessToken);
    expect(header.kid).toBe(active.kid);
  });

  it('logs in with the right password, case-insensitively on the email', async () => {
    const email = uniqueEmail('login');
    await register(email);
    const { session, mfaRequired, mfaToken } = await auth.login({ email: ` ${email.toUpperCase()}`, password });
    expect(session).toMatchObject({ tokenType: 'Bearer', expiresIn: 900 });
    expect(mfaRequired).toBeUndefined();
    expect(mfaToken).toBeUndefined();
    secrets.push(session!.accessToken, session!.refreshToken);
  });

  it('answers a wrong password and an unknown email with the same 401 invalid_credentials', async () => {
    const email = uniqueEmail('creds');
    await register(email);
    const wrong = await httpFailure(auth.login({ email, password: 'not the password at all' }));
    const unknown = await httpFailure(auth.login({ email: uniqueEmail('nobody'), password }));
    const malformed = await httpFailure(auth.login({ email: 'not-an-email', password }));
    for (const outcome of [wrong, unknown, malformed]) {
      expect(outcome.status).toBe(401);
      expect(outcome.err.code).toBe(Code.Unauthenticated);
      expect(outcome.body).toEqual(wrong.body);
    }
    expect(wrong.body).toEqual({
      error: { code: 'invalid_credentials', message: 'The email address or password is incorrect.', field: null, request_id: 'req_test' },
    });
  });

  it('rehashes a password stored with older argon2 parameters at login', async () => {
    const email = uniqueEmail('rehash');
    const { user } = await register(email);
    const weak = await argon2.hash(password, { type: argon2.argon2id, memoryCost: 8192, timeCost: 1, parallelism: 1 });
    await db('users').where({ id: user!.userId }).update({ password_hash: weak });
    const { session } = await auth.login({ email, password });
    secrets.push(session!.accessToken, session!.refreshToken);
    const { password_hash: rehashed } = await db('users').where({ id: user!.userId }).first();
    expect(rehashed).not.toBe(weak);
    expect(argon2Parameters(rehashed)).toEqual({ m: '19456', t: '2', p: '1' });
    expect(await argon2.verify(rehashed, password)).toBe(true);
  });

  it('stores argon2id hashes with m=19456, t=2, p=1', async () => {
    const { user } = await register();
    const { password_hash: hash } = await db('users').where({ id: user!.userId }).first();
    expect(hash.startsWith('$argon2id$v=19$')).toBe(true);
    expect(argon2Parameters(hash)).toEqual({ m: '19456', t: '2', p: '1' });
  });

  it.each([
    ['too short', 'Tr0ub4!', 'weak_password'],
    ['too short in code points', '😀😀😀😀', 'weak_password'],
    ['common', 'password123', 'weak_password'],
    ['common in another case', 'BaseBall', 'weak_password'],
    ['too long', 'x'.repeat(129), 'invalid_request'],
    ['missing', '', 'invalid_request'],
  ])('refuses a %s password with 400 on field password', async (_label, badPassword, code) => {
    const outcome = await httpFailure(auth.register({ email: uniqueEmail('weak'), password: badPassword }));
    expect(outcome).toMatchObject({ status: 400, code, field: 'password' });
  });

  it('refuses a password equal to the email (any case)', async () => {
    const email = uniqueEmail('same');
    const outcome = await httpFailure(auth.register({ email, password: email.toUpperCase() }));
    expect(outcome).toMatchObject({ status: 400, code: 'weak_password', field: 'password' });
    expect(await db('users').where({ email }).first()).toBeUndefined();
  });

  it('counts password length in code points', async () => {
    const email = uniqueEmail('emoji');
    secrets.push('😀'.repeat(8));
    const { user, session } = await auth.register({ email, password: '😀'.repeat(8) });
    secrets.push(session!.accessToken, session!.refreshToken);
    expect(user!.email).toBe(email);
    const { session: again } = await auth.login({ email, password: '😀'.repeat(8) });
    secrets.push(again!.accessToken, again!.refreshToken);
  });

  it.each([
    ['empty email', { email: '' }, 'email'],
    ['malformed email', { email: 'not-an-email' }, 'email'],
    ['email without a domain dot', { email: 'someone@localhost' }, 'email'],
    ['email with a double dot', { email: 'a..b@example.com' }, 'email'],
    ['email over 254 characters', { email: `${'a'.repeat(60)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.com` }, 'email'],
    ['empty full name', { fullName: '   ' }, 'full_name'],
    ['full name over 200 characters', { fullName: 'n'.repeat(201) }, 'full_name'],
    ['full name with a control character', { fullName: 'Ada\u0000Lovelace' }, 'full_name'],
  ])('refuses an %s with 400 on its field', async (_label, overrides, field) => {
    const outcome = await httpFailure(auth.register({ email: uniqueEmail('invalid'), password, ...overrides }));
    expect(outcome).toMatchObject({ status: 400, field });
  });

  it('refuses login without email or password with 400 on the field', async () => {
    expect(await httpFailure(auth.login({ email: '', password }))).toMatchObject({ status: 400, field: 'email' });
    expect(await httpFailure(auth.login({ email: uniqueEmail(), password: '' }))).toMatchObject({ status: 400, field: 'password' });
  });

  it('answers 409 email_taken for an address registered already, in any case', async () => {
    const email = uniqueEmail('dup');
    await register(email);
    const outcome = await httpFailure(auth.register({ email: email.toUpperCase(), password }));
    expect(outcome).toMatchObject({ status: 409, code: 'email_taken', field: 'email' });
  });

  it('lets exactly one of two concurrent registrations of one address through, leaving nothing half-written', async () => {
    const email = uniqueEmail('race');
    const before = await db('organizations').count<{ count: number }[]>({ count: '*' });
    secrets.push(password);
    const results = await Promise.allSettled([auth.register({ email, password }), auth.register({ email, password })]);
    const fulfilled = results.filter((result) => result.status === 'fulfilled');
    const rejected = results.filter((result): result is PromiseRejectedResult => result.status === 'rejected');
    expect(fulfilled).toHaveLength(1);
    expect(rejected).toHaveLength(1);
    for (const result of fulfilled) {
      const session = (result as PromiseFulfilledResult<Awaited<ReturnType<typeof auth.register>>>).value.session!;
      secrets.push(session.accessToken, session.refreshToken);
    }
    const error = ConnectError.from(rejected[0].reason);
    expect(error.code).toBe(Code.AlreadyExists);
    expect(error.findDetails(ErrorDetailSchema)[0]?.code).toBe('email_taken');
    const after = await db('organizations').count<{ count: number }[]>({ count: '*' });
    expect(Number(after[0].count) - Number(before[0].count)).toBe(1);
    expect(await db('users').where({ email })).toHaveLength(1);
  });

  it('resolves the personal workspace or a named one for the gateway, 404 otherwise', async () => {
    const alice = (await register(uniqueEmail('alice'))).user!;
    const bob = (await register(uniqueEmail('bob'))).user!;
    expect(await orgs.resolveWorkspace({ userId: alice.userId, workspaceId: '' })).toMatchObject({
      workspaceId: alice.personalWorkspaceId,
      role: 'owner',
      deactivated: false,
    });
    expect(await orgs.resolveWorkspace({ userId: alice.userId, workspaceId: alice.personalWorkspaceId })).toMatchObject({
      workspaceId: alice.personalWorkspaceId,
      role: 'owner',
    });
    for (const request of [
      { userId: alice.userId, workspaceId: bob.personalWorkspaceId },
      { userId: alice.userId, workspaceId: 'org_doesnotexist' },
      { userId: 'usr_doesnotexist', workspaceId: '' },
    ]) {
      expect(await httpFailure(orgs.resolveWorkspace(request))).toMatchObject({ status: 404, code: 'workspace_not_found' });
    }
    expect(await httpFailure(orgs.resolveWorkspace({ userId: '', workspaceId: '' }))).toMatchObject({ status: 400, field: 'user_id' });
    const fromKeys = meshClient(OrganizationService, service.baseUrl, { caller: 'data-plane' });
    expect((await httpFailure(fromKeys.resolveWorkspace({ userId: alice.userId, workspaceId: '' }))).status).toBe(403);
  });

  it('needs a principal for GetAccount', async () => {
    const anonymous = meshClient(AccountService, service.baseUrl, { caller: 'gateway' });
    expect(await httpFailure(anonymous.getAccount({}))).toMatchObject({ status: 401 });
    const noToken = meshClient(AccountService, service.baseUrl, null);
    expect((await failure(noToken.getAccount({}))).code).toBe(Code.Unauthenticated);
  });

  it('answers an API key on a user-session-only RPC with 403 user_session_required, before the handler', async () => {
    const user = (await register()).user!;
    const asKey = meshClient(AccountService, service.baseUrl, {
      caller: 'gateway',
      principalId: user.userId,
      principalType: 'key',
      workspaceId: user.personalWorkspaceId,
      role: 'owner',
      scopes: ['inference', 'read', 'manage'],
    });
    for (const call of [
      () => asKey.enrollTwoFactor({ password }),
      () => asKey.activateTwoFactor({ code: '000000' }),
      () => asKey.disableTwoFactor({ password }),
      () => asKey.regenerateRecoveryCodes({ code: '000000' }),
      () => asKey.deactivateAccount({ password }),
    ]) {
      expect(await httpFailure(call())).toMatchObject({ status: 403, code: 'user_session_required' });
    }
    // What docs/api/identity.md#principals lets a key do on the account still works.
    expect((await asKey.getAccount({})).userId).toBe(user.userId);
    expect((await asKey.getTwoFactorStatus({})).enabled).toBe(false);
    // Nothing was started by the refused calls: 2FA was never enrolled, the account is active.
    const [row] = await db('users').where({ id: user.userId }).select('deactivated_at');
    expect(row.deactivated_at).toBeNull();
  });

  it('refuses unknown refresh and verification tokens', async () => {
    expect((await failure(auth.refresh({ refreshToken: 'x' }))).code).toBe(Code.Unauthenticated);
    expect((await failure(auth.verifyEmail({ token: 'x' }))).code).toBe(Code.InvalidArgument);
  });

  it('never logs passwords or tokens', async () => {
    const output = service.output();
    expect(output).toContain('account registered');
    expect(output).toContain('mail written to the mailbox');
    expect(secrets.length).toBeGreaterThan(10);
    for (const secret of new Set(secrets)) {
      expect(output.includes(secret), `log contains a secret (${secret.slice(0, 4)}…)`).toBe(false);
    }
    // The mailbox log line names the mail but not the recipient in full.
    for (const line of output.split('\n').filter((line) => line.includes('mail written'))) {
      expect(line).not.toMatch(/"to":"[^*"]+@/);
    }
  });
});
