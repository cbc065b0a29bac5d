import { eraseDueAccounts } from '@switchboard/identity/erasure';
import { eventually, expectErrorBody, TestAuthenticator, tokenOf, waitForMail } from '@switchboard/testkit/account-helpers';
import { fromAddress, newUser, type RestCall } from '@switchboard/testkit/mesh';
import { decodeJwt } from 'jose';
import { describe, expect, it } from 'vitest';
import { identitySuiteOfFile } from './identity-suite.js';

/**
 * Two-factor authentication, the sign-in challenge, deactivation and erasure through REST, and
 * a look at every service's log for the secrets this file handled.
 */

const suite = identitySuiteOfFile();
let ipCounter = 0;
/** Every password, token, TOTP secret and recovery code this file saw. */
const secrets: string[] = [];

function clientFromNewIp() {
  ipCounter += 1;
  const fromIp = fromAddress(suite.call, `192.0.2.${ipCounter}`);
  const call: RestCall = async (method, pathname, options) => {
    const response = await fromIp(method, pathname, options);
    collectSecrets(response.json);
    return response;
  };
  return call;
}

function collectSecrets(json: unknown): void {
  if (!json || typeof json !== 'object') return;
  const record = json as Record<string, unknown>;
  for (const key of ['access_token', 'refresh_token', 'mfa_token', 'secret', 'otpauth_uri']) {
    if (typeof record[key] === 'string') secrets.push(record[key] as string);
  }
  if (Array.isArray(record.recovery_codes)) secrets.push(...(record.recovery_codes as string[]));
  for (const value of Object.values(record)) if (value && typeof value === 'object') collectSecrets(value);
}

type Call = ReturnType<typeof clientFromNewIp>;

async function registered(call: Call) {
  const user = newUser();
  secrets.push(user.password);
  const response = await call('POST', '/v1/auth/register', { body: user });
  expect(response.status).toBe(201);
  return { ...user, userId: response.json.user.user_id as string, token: response.json.session.access_token as string };
}

/** A user with 2FA on: the authenticator, the recovery codes. */
async function withTwoFactor(call: Call) {
  const user = await registered(call);
  const enrolled = await call('POST', '/v1/account/2fa/enroll', { token: user.token, body: { password: user.password } });
  expect(enrolled.status).toBe(200);
  const app = new TestAuthenticator(enrolled.json.secret);
  const activated = await call('POST', '/v1/account/2fa/activate', { token: user.token, body: { code: await app.code() } });
  expect(activated.status, activated.text).toBe(200);
  return { ...user, app, recoveryCodes: activated.json.recovery_codes as string[] };
}

async function challenge(call: Call, email: string, password: string): Promise<string> {
  const response = await call('POST', '/v1/auth/login', { body: { email, password } });
  expect(response.status).toBe(200);
  expect(response.json).toEqual({ mfa_required: true, mfa_token: expect.stringMatching(/^mfa_/) });
  return response.json.mfa_token;
}

describe('two-factor authentication', () => {
  it('enrolls, activates with a first code and shows 10 recovery codes once', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    expect((await call('GET', '/v1/account/2fa', { token: user.token })).json).toEqual({ enabled: false, enabled_at: null, recovery_codes_remaining: 0 });
    expectErrorBody(await call('POST', '/v1/account/2fa/activate', { token: user.token, body: { code: '123456' } }), 422, 'two_factor_not_enrolled');
    // Re-authentication first (ASVS 7.5.1): the password is required and checked.
    expectErrorBody(await call('POST', '/v1/account/2fa/enroll', { token: user.token }), 400, 'invalid_request', 'password');
    expectErrorBody(
      await call('POST', '/v1/account/2fa/enroll', { token: user.token, body: { password: 'not the password' } }),
      403,
      'reauthentication_failed',
      'password',
    );
    expect(await suite.db('two_factor').where({ user_id: user.userId }).first()).toBeUndefined();
    const enrolled = await call('POST', '/v1/account/2fa/enroll', { token: user.token, body: { password: user.password } });
    expect(enrolled.json.secret).toMatch(/^[A-Z2-7]{32}$/); // 160 bits
    expect(enrolled.json.otpauth_uri).toMatch(/^otpauth:\/\/totp\/Switchboard:/);
    expect(enrolled.json.otpauth_uri).toContain(`secret=${enrolled.json.secret}`);
    expect(enrolled.json.otpauth_uri).toContain('algorithm=SHA1&digits=6&period=30');
    const stored = await suite.db('two_factor').where({ user_id: user.userId }).first();
    expect(stored.pending_secret_encrypted).not.toContain(enrolled.json.secret);
    const app = new TestAuthenticator(enrolled.json.secret);
    expectErrorBody(await call('POST', '/v1/account/2fa/activate', { token: user.token, body: { code: app.wrongCode() } }), 400, 'invalid_code', 'code');
    expectErrorBody(await call('POST', '/v1/account/2fa/activate', { token: user.token, body: { code: 'abc' } }), 400, 'invalid_request', 'code');
    const activated = await call('POST', '/v1/account/2fa/activate', { token: user.token, body: { code: await app.code() } });
    expect(activated.status).toBe(200);
    expect(activated.json.recovery_codes).toHaveLength(10);
    expect(new Set(activated.json.recovery_codes).size).toBe(10);
    for (const code of activated.json.recovery_codes) expect(code).toMatch(/^[a-z2-7]{5}(-[a-z2-7]{5}){4}$/); // 125 bits
    const status = (await call('GET', '/v1/account/2fa', { token: user.token })).json;
    expect(status).toMatchObject({ enabled: true, recovery_codes_remaining: 10 });
    expect(Date.parse(status.enabled_at)).toBeGreaterThan(Date.now() - 60_000);
    expect((await call('GET', '/v1/account', { token: user.token })).json.two_factor_enabled).toBe(true);
    expectErrorBody(await call('POST', '/v1/account/2fa/enroll', { token: user.token, body: { password: user.password } }), 409, 'two_factor_already_enabled');
    await waitForMail(suite.mailbox, user.email, 'two_factor_enabled');
  });

  it('signs in with a challenge: the mfa_token is no access token, a code works once, a recovery code once', async () => {
    const call = clientFromNewIp();
    const user = await withTwoFactor(call);
    const mfaToken = await challenge(call, user.email, user.password);
    expectErrorBody(await call('GET', '/v1/account', { token: mfaToken }), 401, 'invalid_token');
    // The activation code is used up: never accepted twice.
    expectErrorBody(await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: mfaToken, code: user.app.codeOfLastStep() } }), 401, 'invalid_code', 'code');
    expectErrorBody(await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: mfaToken, code: user.app.wrongCode() } }), 401, 'invalid_code');
    expectErrorBody(await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: mfaToken } }), 400, 'invalid_request', 'code');
    const code = await user.app.code();
    const signedIn = await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: mfaToken, code } });
    expect(signedIn.status).toBe(200);
    expect(decodeJwt(signedIn.json.session.access_token).aal).toBe('aal2');
    expect((await call('GET', '/v1/account', { token: signedIn.json.session.access_token })).status).toBe(200);
    // The token is spent, and the same code on a new challenge is refused.
    expectErrorBody(await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: mfaToken, code } }), 400, 'invalid_token', 'mfa_token');
    const second = await challenge(call, user.email, user.password);
    expectErrorBody(await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: second, code } }), 401, 'invalid_code');

    const [recovery] = user.recoveryCodes;
    expect((await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: second, recovery_code: recovery.toUpperCase() } })).status).toBe(200);
    const third = await challenge(call, user.email, user.password);
    expectErrorBody(await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: third, recovery_code: recovery } }), 401, 'invalid_code', 'recovery_code');
    expect((await call('GET', '/v1/account/2fa', { token: user.token })).json.recovery_codes_remaining).toBe(9);
  });

  it('accepts one code once even when two challenges send it at the same moment', async () => {
    const call = clientFromNewIp();
    const user = await withTwoFactor(call);
    const [first, second] = [await challenge(call, user.email, user.password), await challenge(call, user.email, user.password)];
    const code = await user.app.code();
    const answers = await Promise.all([first, second].map((mfaToken) => call('POST', '/v1/auth/login/2fa', { body: { mfa_token: mfaToken, code } })));
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 401]);
  });

  it('kills an mfa_token after 5 wrong codes or 5 minutes, and throttles second factors per account', async () => {
    const call = clientFromNewIp();
    const user = await withTwoFactor(call);
    const mfaToken = await challenge(call, user.email, user.password);
    for (let attempt = 0; attempt < 5; attempt++) {
      expectErrorBody(await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: mfaToken, code: user.app.wrongCode() } }), 401, 'invalid_code');
    }
    expectErrorBody(
      await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: mfaToken, code: await user.app.code() } }),
      400,
      'invalid_token',
      'mfa_token',
    );

    // Expiry: the clock is moved by aging the challenge (its lifetime is 5 minutes).
    const expiring = await challenge(call, user.email, user.password);
    const row = await suite.db('mfa_challenges').where({ user_id: user.userId }).orderBy('created_at', 'desc').first();
    expect(Math.abs(row.expires_at.getTime() - row.created_at.getTime() - 300_000)).toBeLessThan(5_000);
    await suite
      .db('mfa_challenges')
      .where({ token_hash: row.token_hash })
      .update({ expires_at: new Date(Date.now() - 1000) });
    expectErrorBody(await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: expiring, code: user.app.wrongCode() } }), 400, 'invalid_token');

    // Five more failures on a new challenge reach the account's second-factor limit (10 in 15 min).
    const another = await challenge(call, user.email, user.password);
    for (let attempt = 0; attempt < 5; attempt++) await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: another, code: user.app.wrongCode() } });
    const last = await challenge(clientFromNewIp(), user.email, user.password);
    const blocked = await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: last, code: user.app.wrongCode() } });
    expectErrorBody(blocked, 429, 'too_many_attempts');
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('regenerates recovery codes with a current code (the old set stops working) and disables with the password', async () => {
    const call = clientFromNewIp();
    const user = await withTwoFactor(call);
    expectErrorBody(
      await call('POST', '/v1/account/2fa/recovery-codes', { token: user.token, body: { code: user.app.wrongCode() } }),
      403,
      'reauthentication_failed',
      'code',
    );
    const regenerated = await call('POST', '/v1/account/2fa/recovery-codes', { token: user.token, body: { code: await user.app.code() } });
    expect(regenerated.status).toBe(200);
    expect(regenerated.json.recovery_codes).toHaveLength(10);
    await waitForMail(suite.mailbox, user.email, 'recovery_codes_regenerated');
    const mfaToken = await challenge(call, user.email, user.password);
    expectErrorBody(await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: mfaToken, recovery_code: user.recoveryCodes[0] } }), 401, 'invalid_code');
    expect((await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: mfaToken, recovery_code: regenerated.json.recovery_codes[0] } })).status).toBe(200);

    expectErrorBody(await call('POST', '/v1/account/2fa/disable', { token: user.token, body: {} }), 400, 'invalid_request', 'code');
    expectErrorBody(
      await call('POST', '/v1/account/2fa/disable', { token: user.token, body: { password: 'not my password' } }),
      403,
      'reauthentication_failed',
      'password',
    );
    expectErrorBody(
      await call('POST', '/v1/account/2fa/disable', { token: user.token, body: { code: user.app.wrongCode() } }),
      403,
      'reauthentication_failed',
      'code',
    );
    expect((await call('POST', '/v1/account/2fa/disable', { token: user.token, body: { password: user.password } })).status).toBe(204);
    expect((await call('GET', '/v1/account/2fa', { token: user.token })).json).toEqual({ enabled: false, enabled_at: null, recovery_codes_remaining: 0 });
    await waitForMail(suite.mailbox, user.email, 'two_factor_disabled');
    const login = await call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } });
    expect(Object.keys(login.json)).toEqual(['session']);
  });

  it('disables with a current code (and answers 204 when it is off already)', async () => {
    const call = clientFromNewIp();
    const user = await withTwoFactor(call);
    expect((await call('POST', '/v1/account/2fa/disable', { token: user.token, body: { code: await user.app.code() } })).status).toBe(204);
    expect((await call('GET', '/v1/account', { token: user.token })).json.two_factor_enabled).toBe(false);
    expect((await call('POST', '/v1/account/2fa/disable', { token: user.token, body: { password: user.password } })).status).toBe(204);
    expectErrorBody(await call('POST', '/v1/account/2fa/recovery-codes', { token: user.token, body: { code: '123456' } }), 422, 'two_factor_not_enabled');
  });

  it('still asks for the second factor after a password reset', async () => {
    const call = clientFromNewIp();
    const user = await withTwoFactor(call);
    await call('POST', '/v1/auth/password-reset', { body: { email: user.email } });
    const token = tokenOf(await waitForMail(suite.mailbox, user.email, 'password_reset_request'));
    secrets.push(token, 'a reset passphrase 42');
    expect((await call('POST', '/v1/auth/password-reset/confirm', { body: { token, new_password: 'a reset passphrase 42' } })).status).toBe(204);
    const mfaToken = await challenge(call, user.email, 'a reset passphrase 42');
    expect((await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: mfaToken, code: await user.app.code() } })).status).toBe(200);
  });
});

describe('deactivation', () => {
  it('needs the password, revokes every session at once, emits user.deactivated and refuses sign-in', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const refresh = (await call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } })).json.session.refresh_token;
    expectErrorBody(
      await call('POST', '/v1/account/deactivate', { token: user.token, body: { password: 'not my password' } }),
      403,
      'reauthentication_failed',
      'password',
    );
    const deactivated = await call('POST', '/v1/account/deactivate', { token: user.token, body: { password: user.password } });
    expect(deactivated.status).toBe(202);
    const days = (Date.parse(deactivated.json.erase_after) - Date.parse(deactivated.json.deactivated_at)) / 86_400_000;
    expect(days).toBe(30);
    expectErrorBody(await call('GET', '/v1/account', { token: user.token }), 401, 'session_revoked');
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: refresh } }), 401, 'invalid_token');
    expectErrorBody(await call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } }), 401, 'invalid_credentials');
    const events = await suite.db('outbox').whereRaw("payload->>'type' = 'user.deactivated'").whereRaw("payload->'data'->>'user_id' = ?", [user.userId]);
    expect(events).toHaveLength(1);
    await waitForMail(suite.mailbox, user.email, 'account_deactivated');
  });

  it('needs a current code when 2FA is on', async () => {
    const call = clientFromNewIp();
    const user = await withTwoFactor(call);
    expectErrorBody(await call('POST', '/v1/account/deactivate', { token: user.token, body: { password: user.password } }), 400, 'invalid_request', 'code');
    expectErrorBody(
      await call('POST', '/v1/account/deactivate', { token: user.token, body: { password: user.password, code: user.app.wrongCode() } }),
      403,
      'reauthentication_failed',
      'code',
    );
    expect((await call('POST', '/v1/account/deactivate', { token: user.token, body: { password: user.password, code: await user.app.code() } })).status).toBe(
      202,
    );
  });

  it('refuses an owner of an organization with other members (409 with the org ids), and deletes organizations of one member', async () => {
    const call = clientFromNewIp();
    const owner = await registered(call);
    const member = await registered(call);
    // Organizations are another issue's endpoints: set them up in the database.
    const shared = `org_shared${Date.now()}`;
    const alone = `org_alone${Date.now()}`;
    await suite.db('organizations').insert([
      { id: shared, name: 'Shared' },
      { id: alone, name: 'Alone' },
    ]);
    await suite.db('memberships').insert([
      { org_id: shared, user_id: owner.userId, role: 'owner' },
      { org_id: shared, user_id: member.userId, role: 'developer' },
      { org_id: alone, user_id: owner.userId, role: 'owner' },
    ]);
    const refused = await call('POST', '/v1/account/deactivate', { token: owner.token, body: { password: owner.password } });
    expectErrorBody(refused, 409, 'ownership_transfer_required');
    expect(refused.json.error.metadata).toEqual({ org_ids: [shared] });
    expect((await call('GET', '/v1/account', { token: owner.token })).status).toBe(200);

    // Once the other member owns it, the former owner (now admin) leaves it at deactivation.
    await suite.db('memberships').where({ org_id: shared, user_id: owner.userId }).update({ role: 'admin' });
    await suite.db('memberships').where({ org_id: shared, user_id: member.userId }).update({ role: 'owner' });
    expect((await call('POST', '/v1/account/deactivate', { token: owner.token, body: { password: owner.password } })).status).toBe(202);
    expect(await suite.db('organizations').where({ id: alone }).first()).toBeUndefined();
    expect(await suite.db('memberships').where({ org_id: shared }).select('user_id')).toEqual([{ user_id: member.userId }]);
  });

  it('erases email and name when the grace period ends (a controlled clock)', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const deactivated = await call('POST', '/v1/account/deactivate', { token: user.token, body: { password: user.password } });
    const eraseAfter = Date.parse(deactivated.json.erase_after);
    expect(await eraseDueAccounts(suite.db, new Date(eraseAfter - 1000))).not.toContain(user.userId);
    expect((await suite.db('users').where({ id: user.userId }).first()).email).toBe(user.email);
    expect(await eraseDueAccounts(suite.db, new Date(eraseAfter + 1000))).toContain(user.userId);
    const erased = await suite.db('users').where({ id: user.userId }).first();
    expect(erased).toMatchObject({ email: `erased+${user.userId}@erased.invalid`, full_name: null });
    expect(erased.erased_at).not.toBeNull();
    expect(await eraseDueAccounts(suite.db, new Date(eraseAfter + 2000))).not.toContain(user.userId);
    expectErrorBody(await call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } }), 401, 'invalid_credentials');
  });
});

describe('logs', () => {
  it('hold no password, token, TOTP secret or recovery code of this file', async () => {
    const components = ['identity', 'gateway', 'keys', 'billing', 'conversations', 'webhooks'] as const;
    // Give the last lines a moment to arrive (poll until the identity log mentions the last request).
    await eventually(async () => (suite.mesh.output('identity').includes('account deactivated') ? true : undefined), 'identity log');
    const logs = components.map((component) => suite.mesh.output(component)).join('\n');
    expect(secrets.length).toBeGreaterThan(50);
    for (const secret of new Set(secrets)) {
      expect(logs.includes(secret), `a log contains a secret (${secret.slice(0, 6)}…)`).toBe(false);
      // Recovery codes without dashes, TOTP secrets in lower case: the forms a careless log might use.
      expect(logs.includes(secret.replace(/-/g, ''))).toBe(false);
    }
  });
});
