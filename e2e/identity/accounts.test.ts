import { eventually, expectErrorBody, mailsTo, tokenOf, waitForMail } from '@switchboard/testkit/account-helpers';
import { expectLinksOpen, tokenOfLink } from '@switchboard/testkit/mailbox';
import { fromAddress, newUser, type RestCall } from '@switchboard/testkit/mesh';
import { describe, expect, it } from 'vitest';
import { identitySuiteOfFile, verificationResendsPerIp } from './identity-suite.js';

/** Account endpoints of docs/api/identity.md#account-endpoints through the REST surface: sessions, passwords, profile. */

const suite = identitySuiteOfFile();
let ipCounter = 0;

/** A client acting from its own address (the gateway trusts one proxy hop in these tests). */
function clientFromNewIp() {
  ipCounter += 1;
  return fromAddress(suite.call, `198.51.100.${ipCounter}`);
}

async function registered(call = clientFromNewIp()) {
  const user = newUser();
  const response = await call('POST', '/v1/auth/register', { body: user });
  expect(response.status).toBe(201);
  return { ...user, userId: response.json.user.user_id as string, session: response.json.session as { access_token: string; refresh_token: string } };
}

async function login(call: RestCall, email: string, password: string) {
  const response = await call('POST', '/v1/auth/login', { body: { email, password } });
  expect(response.status, response.text).toBe(200);
  return response.json.session as { access_token: string; refresh_token: string };
}

describe('email verification', () => {
  it('verifies the address with the mailed token once, and refuses other tokens with 400 invalid_token', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const token = tokenOf(await waitForMail(suite.mailbox, user.email, 'email_verification'));
    expectErrorBody(await call('POST', '/v1/auth/verify-email', { body: { token: 'not-a-token' } }), 400, 'invalid_token', 'token');
    const verified = await call('POST', '/v1/auth/verify-email', { body: { token } });
    expect(verified.status).toBe(204);
    const account = await call('GET', '/v1/account', { token: user.session.access_token });
    expect(account.json.email_verified).toBe(true);
    expectErrorBody(await call('POST', '/v1/auth/verify-email', { body: { token } }), 400, 'invalid_token', 'token');
    expectErrorBody(await call('POST', '/v1/auth/verify-email', { body: {} }), 400, 'invalid_request', 'token');
  });
});

/** Waits for identity's log line of the resend `response` asked for (its outcome), and returns the outcome. */
async function resendOutcome(response: { headers: Headers }): Promise<string> {
  const requestId = response.headers.get('x-request-id');
  expect(requestId).toBeTruthy();
  return eventually(async () => {
    const line = suite.mesh
      .output('identity')
      .split('\n')
      .find((candidate) => candidate.includes('verification resend handled') && candidate.includes(`"request_id":"${requestId}"`));
    return line && (JSON.parse(line.slice(line.indexOf('{'))) as { outcome: string }).outcome;
  }, `the outcome of the resend ${requestId}`);
}

describe('verification resend', () => {
  const resend = '/v1/auth/verify-email/resend';

  it('answers 202 for any address and mails a new link only to an active account whose address is not verified', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const first = tokenOf(await waitForMail(suite.mailbox, user.email, 'email_verification'));

    const unknown = await call('POST', resend, { body: { email: `nobody.${user.email}` } });
    expect(unknown.status).toBe(202);
    expect(unknown.json).toEqual({});
    expect(await resendOutcome(unknown)).toBe('no_unverified_account');
    const notAnAddress = await call('POST', resend, { body: { email: 'not an address' } });
    expect(notAnAddress.status).toBe(202);
    expectErrorBody(await call('POST', resend, { body: { email: '   ' } }), 400, 'invalid_request', 'email');

    const again = await call('POST', resend, { body: { email: user.email.toUpperCase() } });
    expect(again.status).toBe(202);
    expect(await resendOutcome(again)).toBe('sent');
    const mail = await waitForMail(suite.mailbox, user.email, 'email_verification', 2);
    const token = await tokenOfLink(mail, suite.mesh.env.PUBLIC_BASE_URL, '/app/verify-email');
    expect(token).not.toBe(first);
    expect((await call('POST', '/v1/auth/verify-email', { body: { token } })).status).toBe(204);

    // Verified: nothing more to confirm, no mail.
    const verified = await call('POST', resend, { body: { email: user.email } });
    expect(verified.status).toBe(202);
    expect(await resendOutcome(verified)).toBe('no_unverified_account');
    expect((await mailsTo(suite.mailbox, user.email)).filter((m) => m.kind === 'email_verification')).toHaveLength(2);
  });

  it("sends an account at most 3 verification mails in 15 minutes, registration's included", async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const outcomes: string[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await call('POST', resend, { body: { email: user.email } });
      expect(response.status).toBe(202);
      outcomes.push(await resendOutcome(response));
    }
    expect(outcomes).toEqual(['sent', 'sent', 'throttled']);
    await waitForMail(suite.mailbox, user.email, 'email_verification', 3);
    expect((await mailsTo(suite.mailbox, user.email)).filter((m) => m.kind === 'email_verification')).toHaveLength(3);
    const rows = await suite.db('email_verifications').where({ user_id: user.userId }).count<{ count: string }[]>('* as count');
    expect(Number(rows[0].count)).toBe(3);
  });

  it('limits resends per client address (429 rate_limited with Retry-After), whatever the addresses asked for', async () => {
    const call = clientFromNewIp();
    for (let i = 0; i < verificationResendsPerIp; i++) {
      expect((await call('POST', resend, { body: { email: `ghost${i}@example.com` } })).status).toBe(202);
    }
    const refused = await call('POST', resend, { body: { email: 'ghost@example.com' } });
    expectErrorBody(refused, 429, 'rate_limited');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    // Another address is not affected.
    expect((await clientFromNewIp()('POST', resend, { body: { email: 'ghost@example.com' } })).status).toBe(202);
  });
});

describe('refresh tokens', () => {
  it('rotates on every use; the parent reused at once gets the same successor; an older token revokes the session', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const first = user.session.refresh_token;
    const rotated = await call('POST', '/v1/auth/refresh', { body: { refresh_token: first } });
    expect(rotated.status).toBe(200);
    expect(rotated.json.session).toMatchObject({ token_type: 'Bearer', expires_in: 900 });
    const second = rotated.json.session.refresh_token;
    expect(second).not.toBe(first);

    // Two tabs: the same parent again within 10 s gets the very same successor.
    const concurrent = await call('POST', '/v1/auth/refresh', { body: { refresh_token: first } });
    expect(concurrent.status).toBe(200);
    expect(concurrent.json.session.refresh_token).toBe(second);

    const third = (await call('POST', '/v1/auth/refresh', { body: { refresh_token: second } })).json.session;
    expect((await call('GET', '/v1/account', { token: third.access_token })).status).toBe(200);

    // `first` is no longer the immediate parent of the live token: a replay. The family dies.
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: first } }), 401, 'invalid_token', 'refresh_token');
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: third.refresh_token } }), 401, 'invalid_token');
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: second } }), 401, 'invalid_token');
    // The session's access tokens stop working too: session.revoked reaches the gateway through
    // the outbox and NATS (no response header on this path) well within a second.
    const started = Date.now();
    await eventually(
      async () => ((await call('GET', '/v1/account', { token: third.access_token })).status === 401 ? true : undefined),
      'revocation at the gateway',
      1000,
      5,
    );
    expect(Date.now() - started).toBeLessThan(1000);
    expectErrorBody(await call('GET', '/v1/account', { token: third.access_token }), 401, 'session_revoked');
    // Other sessions of the user are untouched.
    const other = await login(call, user.email, user.password);
    expect((await call('GET', '/v1/account', { token: other.access_token })).status).toBe(200);
  });

  it('gives two truly concurrent refreshes of one token the same successor', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const [a, b] = await Promise.all([
      call('POST', '/v1/auth/refresh', { body: { refresh_token: user.session.refresh_token } }),
      call('POST', '/v1/auth/refresh', { body: { refresh_token: user.session.refresh_token } }),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.json.session.refresh_token).toBe(b.json.session.refresh_token);
    expect((await call('POST', '/v1/auth/refresh', { body: { refresh_token: a.json.session.refresh_token } })).status).toBe(200);
  });

  it('treats the parent reused after 10 s as a replay, and ends sessions idle for 7 days or older than 30 (aged rows)', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const first = user.session.refresh_token;
    const second = (await call('POST', '/v1/auth/refresh', { body: { refresh_token: first } })).json.session.refresh_token;
    const sessionId = (await suite.db('sessions').where({ user_id: user.userId }).first()).id;
    await suite
      .db('refresh_tokens')
      .where({ session_id: sessionId })
      .whereNotNull('used_at')
      .update({ used_at: new Date(Date.now() - 11_000) });
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: first } }), 401, 'invalid_token');
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: second } }), 401, 'invalid_token');
    expect((await suite.db('sessions').where({ id: sessionId }).first()).revoked_reason).toBe('refresh_token_reuse');

    const idle = await login(call, user.email, user.password);
    await suite
      .db('sessions')
      .where({ user_id: user.userId })
      .whereNull('revoked_at')
      .update({ last_used_at: new Date(Date.now() - 7 * 86_400_000 - 1000) });
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: idle.refresh_token } }), 401, 'invalid_token');

    const old = await login(call, user.email, user.password);
    await suite
      .db('sessions')
      .where({ user_id: user.userId })
      .whereNull('revoked_at')
      .update({ expires_at: new Date(Date.now() - 1000) });
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: old.refresh_token } }), 401, 'invalid_token');
  });

  it('refuses unknown and missing refresh tokens', async () => {
    const call = clientFromNewIp();
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: 'nope' } }), 401, 'invalid_token');
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: {} }), 400, 'invalid_request', 'refresh_token');
  });
});

describe('logout', () => {
  it('local: the access token gets 401 on the very next request and the refresh token is dead', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const other = await login(call, user.email, user.password);
    expect((await call('GET', '/v1/account', { token: user.session.access_token })).status).toBe(200); // cached as verified
    expect((await call('POST', '/v1/auth/logout', { token: user.session.access_token })).status).toBe(204);
    expectErrorBody(await call('GET', '/v1/account', { token: user.session.access_token }), 401, 'session_revoked');
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: user.session.refresh_token } }), 401, 'invalid_token');
    expect((await call('GET', '/v1/account', { token: other.access_token })).status).toBe(200);
  });

  it('others (as a query parameter) ends every other session; global ends all', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const second = await login(call, user.email, user.password);
    const third = await login(call, user.email, user.password);
    expect((await call('POST', '/v1/auth/logout?scope=others', { token: second.access_token })).status).toBe(204);
    expect((await call('GET', '/v1/account', { token: second.access_token })).status).toBe(200);
    expectErrorBody(await call('GET', '/v1/account', { token: user.session.access_token }), 401, 'session_revoked');
    expectErrorBody(await call('GET', '/v1/account', { token: third.access_token }), 401, 'session_revoked');
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: third.refresh_token } }), 401, 'invalid_token');

    const fourth = await login(call, user.email, user.password);
    expect((await call('POST', '/v1/auth/logout', { token: fourth.access_token, body: { scope: 'global' } })).status).toBe(204);
    expectErrorBody(await call('GET', '/v1/account', { token: second.access_token }), 401, 'session_revoked');
    expectErrorBody(await call('GET', '/v1/account', { token: fourth.access_token }), 401, 'session_revoked');
  });

  it('keeps refusing a revoked session after a gateway restart (the set is loaded from identity)', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    expect((await call('POST', '/v1/auth/logout', { token: user.session.access_token })).status).toBe(204);
    await suite.mesh.stopComponent('gateway');
    await suite.mesh.startComponent('gateway');
    expectErrorBody(await call('GET', '/v1/account', { token: user.session.access_token }), 401, 'session_revoked');
  });

  it('refuses an unknown scope and a missing token', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    expectErrorBody(await call('POST', '/v1/auth/logout?scope=everything', { token: user.session.access_token }), 400, 'invalid_request', 'scope');
    expectErrorBody(await call('POST', '/v1/auth/logout'), 401, 'unauthenticated');
  });
});

describe('signed-in sessions', () => {
  it('lists the active sessions newest first with where they were opened, and signs one out at once', async () => {
    const call = clientFromNewIp();
    const laptop = (method: string, path: string, options: Parameters<RestCall>[2] = {}) =>
      call(method, path, { ...options, headers: { 'user-agent': 'Laptop browser/1.0', ...options.headers } });
    const user = await registered(laptop);
    const phoneCall = fromAddress(suite.call, '203.0.113.9');
    const phone = (
      await phoneCall('POST', '/v1/auth/login', { body: { email: user.email, password: user.password }, headers: { 'user-agent': 'x'.repeat(400) } })
    ).json.session as { access_token: string; refresh_token: string };

    const list = await call('GET', '/v1/account/sessions', { token: user.session.access_token });
    expect(list.status, list.text).toBe(200);
    expect(list.json).toMatchObject({ has_more: false, next_cursor: null });
    const [newest, oldest] = list.json.data;
    expect(list.json.data).toHaveLength(2);
    expect(newest).toMatchObject({ ip: '203.0.113.9', user_agent: 'x'.repeat(256), current: false });
    expect(oldest).toMatchObject({ ip: `198.51.100.${ipCounter}`, user_agent: 'Laptop browser/1.0', current: true });
    expect(Date.parse(oldest.expires_at)).toBeGreaterThan(Date.parse(oldest.last_used_at));
    const page = await call('GET', '/v1/account/sessions?limit=1', { token: user.session.access_token });
    expect(page.json).toMatchObject({ data: [{ session_id: newest.session_id }], has_more: true });

    // Another user's session is not found, and neither is an unknown one.
    const other = await registered(call);
    expectErrorBody(await call('DELETE', `/v1/account/sessions/${newest.session_id}`, { token: other.session.access_token }), 404, 'session_not_found');
    expectErrorBody(await call('DELETE', '/v1/account/sessions/ses_nope', { token: user.session.access_token }), 404, 'session_not_found');
    expect((await call('GET', '/v1/account', { token: phone.access_token })).status).toBe(200);

    // A user session only: an API key of the same user is refused.
    const key = await call('POST', '/v1/keys', { token: user.session.access_token, body: { name: 'sessions' } });
    expect(key.status, key.text).toBe(201);
    expectErrorBody(await call('GET', '/v1/account/sessions', { token: key.json.full_key }), 403, 'user_session_required');
    expectErrorBody(await call('DELETE', `/v1/account/sessions/${newest.session_id}`, { token: key.json.full_key }), 403, 'user_session_required');

    expect((await call('DELETE', `/v1/account/sessions/${newest.session_id}`, { token: user.session.access_token })).status).toBe(204);
    expectErrorBody(await call('GET', '/v1/account', { token: phone.access_token }), 401, 'session_revoked');
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: phone.refresh_token } }), 401, 'invalid_token');
    expect((await call('GET', '/v1/account/sessions', { token: user.session.access_token })).json.data).toEqual([oldest]);
    expectErrorBody(await call('DELETE', `/v1/account/sessions/${newest.session_id}`, { token: user.session.access_token }), 404, 'session_not_found');
  });
});

describe('the dashboard session cookie', () => {
  const cookieMode = { 'x-switchboard-session': 'cookie' };
  const refreshCookie = (response: { headers: Headers }) => response.headers.getSetCookie().find((cookie) => cookie.startsWith('sb_refresh='));

  it('keeps the refresh token out of the body, in an HttpOnly SameSite=Strict cookie of the refresh path, only on request', async () => {
    const call = clientFromNewIp();
    const user = newUser();
    const registration = await call('POST', '/v1/auth/register', { body: user, headers: cookieMode });
    expect(registration.status).toBe(201);
    expect(registration.json.session.access_token).toEqual(expect.any(String));
    expect('refresh_token' in registration.json.session).toBe(false);
    const cookie = refreshCookie(registration)!;
    // Plain http to a loopback address: no Secure (the development start); behind TLS it is Secure.
    expect(cookie).toMatch(/^sb_refresh=[\w-]{43}; Max-Age=2592000; Path=\/v1\/auth\/refresh; HttpOnly; SameSite=Strict$/);
    const token = cookie.slice('sb_refresh='.length, cookie.indexOf(';'));

    // Without the header the cookie is not read: a forged cross-site request cannot send it.
    expectErrorBody(await call('POST', '/v1/auth/refresh', { headers: { cookie: `sb_refresh=${token}` } }), 400, 'invalid_request', 'refresh_token');
    const renewed = await call('POST', '/v1/auth/refresh', { headers: { ...cookieMode, cookie: `sb_refresh=${token}`, 'x-forwarded-proto': 'https' } });
    expect(renewed.status, renewed.text).toBe(200);
    expect('refresh_token' in renewed.json.session).toBe(false);
    const next = refreshCookie(renewed)!;
    expect(next).toMatch(/; Path=\/v1\/auth\/refresh; HttpOnly; SameSite=Strict; Secure$/);
    expect((await call('GET', '/v1/account', { token: renewed.json.session.access_token })).status).toBe(200);

    // API clients keep the body tokens: no cookie without the header.
    const login = await call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } });
    expect(login.json.session.refresh_token).toEqual(expect.any(String));
    expect(refreshCookie(login)).toBeUndefined();

    // Two cookies of the name (one planted beside ours by a sibling subdomain): neither is used.
    const planted = await call('POST', '/v1/auth/refresh', {
      headers: { ...cookieMode, cookie: `sb_refresh=${login.json.session.refresh_token}; sb_refresh=${next.slice('sb_refresh='.length, next.indexOf(';'))}` },
    });
    expectErrorBody(planted, 400, 'invalid_request', 'refresh_token');

    // A refresh token that does not work (unknown, rotated, revoked) ends the cookie.
    const reused = await call('POST', '/v1/auth/refresh', { headers: { ...cookieMode, cookie: `sb_refresh=${token}x` } });
    expectErrorBody(reused, 401, 'invalid_token');
    expect(refreshCookie(reused)).toMatch(/^sb_refresh=; Max-Age=0; Path=\/v1\/auth\/refresh; HttpOnly; SameSite=Strict$/);

    // Signing out the other sessions keeps this one and its cookie; a logout of this one clears it.
    const others = await call('POST', '/v1/auth/logout?scope=others', { token: renewed.json.session.access_token, headers: cookieMode });
    expect(others.status).toBe(204);
    expect(refreshCookie(others)).toBeUndefined();
    const logout = await call('POST', '/v1/auth/logout', { token: renewed.json.session.access_token, headers: cookieMode });
    expect(logout.status).toBe(204);
    expect(refreshCookie(logout)).toMatch(/^sb_refresh=; Max-Age=0;/);
    const nextToken = next.slice('sb_refresh='.length, next.indexOf(';'));
    expectErrorBody(await call('POST', '/v1/auth/refresh', { headers: { ...cookieMode, cookie: `sb_refresh=${nextToken}` } }), 401, 'invalid_token');
  });

  it('refuses the CORS preflight a cross-site fetch with the header would need', async () => {
    const preflight = await fetch(`${suite.mesh.gatewayUrl}/v1/auth/refresh`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-switchboard-session' },
    });
    expect(preflight.ok).toBe(false);
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
    expect(preflight.headers.get('access-control-allow-headers')).toBeNull();
  });
});

describe('profile and password', () => {
  it('updates the full name within 1..200 characters', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const updated = await call('PATCH', '/v1/account', { token: user.session.access_token, body: { full_name: '  Ada King  ' } });
    expect(updated.status).toBe(200);
    expect(updated.json).toMatchObject({ user_id: user.userId, full_name: 'Ada King', email: user.email });
    expectErrorBody(await call('PATCH', '/v1/account', { token: user.session.access_token, body: { full_name: '   ' } }), 400, undefined, 'full_name');
    expectErrorBody(
      await call('PATCH', '/v1/account', { token: user.session.access_token, body: { full_name: 'x'.repeat(201) } }),
      400,
      undefined,
      'full_name',
    );
    expectErrorBody(await call('PATCH', '/v1/account', { token: user.session.access_token, body: {} }), 400, undefined, 'full_name');
  });

  it('changes the password: wrong current is 403, other sessions (refresh tokens too) are revoked, a notice is mailed', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const other = await login(call, user.email, user.password);
    const path = '/v1/account/password';
    expectErrorBody(
      await call('POST', path, { token: user.session.access_token, body: { current_password: 'wrong password here', new_password: 'a brand new passphrase' } }),
      403,
      'reauthentication_failed',
      'current_password',
    );
    expectErrorBody(
      await call('POST', path, { token: user.session.access_token, body: { current_password: user.password, new_password: 'short' } }),
      400,
      'weak_password',
      'new_password',
    );
    expectErrorBody(
      await call('POST', path, { token: user.session.access_token, body: { current_password: user.password, new_password: 'password123' } }),
      400,
      'weak_password',
      'new_password',
    );
    const changed = await call('POST', path, {
      token: user.session.access_token,
      body: { current_password: user.password, new_password: 'a brand new passphrase' },
    });
    expect(changed.status).toBe(204);
    // This session goes on; the other one is gone, its refresh token included.
    expect((await call('GET', '/v1/account', { token: user.session.access_token })).status).toBe(200);
    expectErrorBody(await call('GET', '/v1/account', { token: other.access_token }), 401, 'session_revoked');
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: other.refresh_token } }), 401, 'invalid_token');
    expect((await call('POST', '/v1/auth/refresh', { body: { refresh_token: user.session.refresh_token } })).status).toBe(200);
    expectErrorBody(await call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } }), 401, 'invalid_credentials');
    await login(call, user.email, 'a brand new passphrase');
    // The notice links to the page that asks for a reset.
    await expectLinksOpen(await waitForMail(suite.mailbox, user.email, 'password_changed'));
  });
});

describe('password reset', () => {
  it('answers 202 for any address, mails a single-use token that resets the password and revokes every session', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const unknown = await call('POST', '/v1/auth/password-reset', { body: { email: `nobody.${user.email}` } });
    expect(unknown.status).toBe(202);
    expect(unknown.json).toEqual({});
    const known = await call('POST', '/v1/auth/password-reset', { body: { email: user.email.toUpperCase() } });
    expect(known.status).toBe(202);
    expect(known.json).toEqual({});
    const token = await tokenOfLink(
      await waitForMail(suite.mailbox, user.email, 'password_reset_request'),
      suite.mesh.env.PUBLIC_BASE_URL,
      '/app/reset-password/confirm',
    );
    expect(await mailsTo(suite.mailbox, `nobody.${user.email}`)).toEqual([]);

    const confirm = '/v1/auth/password-reset/confirm';
    // A refused password leaves the token usable.
    expectErrorBody(await call('POST', confirm, { body: { token, new_password: 'short' } }), 400, 'weak_password', 'new_password');
    expect((await call('POST', confirm, { body: { token, new_password: 'reset to something long' } })).status).toBe(204);
    expectErrorBody(await call('POST', confirm, { body: { token, new_password: 'reset to something else' } }), 400, 'invalid_token', 'token');
    expectErrorBody(await call('POST', confirm, { body: { token: 'made-up', new_password: 'reset to something else' } }), 400, 'invalid_token', 'token');

    expectErrorBody(await call('GET', '/v1/account', { token: user.session.access_token }), 401, 'session_revoked');
    expectErrorBody(await call('POST', '/v1/auth/refresh', { body: { refresh_token: user.session.refresh_token } }), 401, 'invalid_token');
    expectErrorBody(await call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } }), 401, 'invalid_credentials');
    await login(call, user.email, 'reset to something long');
    await waitForMail(suite.mailbox, user.email, 'password_reset');
  });

  it('refuses a reset token after its hour (the clock is moved by aging the row)', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    await call('POST', '/v1/auth/password-reset', { body: { email: user.email } });
    const token = tokenOf(await waitForMail(suite.mailbox, user.email, 'password_reset_request'));
    const row = await suite.db('password_resets').where({ user_id: user.userId }).first();
    expect(Math.abs(row.expires_at.getTime() - row.created_at.getTime() - 3600_000)).toBeLessThan(5_000);
    expect(row.token_hash).not.toContain(token);
    await suite
      .db('password_resets')
      .where({ user_id: user.userId })
      .update({ expires_at: new Date(Date.now() - 1000) });
    expectErrorBody(await call('POST', '/v1/auth/password-reset/confirm', { body: { token, new_password: 'reset to something long' } }), 400, 'invalid_token');
    await login(call, user.email, user.password);
  });
});

describe('logs', () => {
  it('hold no password, access, refresh, verification or reset token of a full flow', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const secrets = [user.password, user.session.access_token, user.session.refresh_token];
    secrets.push(tokenOf(await waitForMail(suite.mailbox, user.email, 'email_verification')));
    const rotated = (await call('POST', '/v1/auth/refresh', { body: { refresh_token: user.session.refresh_token } })).json.session;
    secrets.push(rotated.access_token, rotated.refresh_token);
    await call('POST', '/v1/account/password', {
      token: rotated.access_token,
      body: { current_password: user.password, new_password: 'log check passphrase 1' },
    });
    await call('POST', '/v1/auth/password-reset', { body: { email: user.email } });
    const reset = tokenOf(await waitForMail(suite.mailbox, user.email, 'password_reset_request'));
    await call('POST', '/v1/auth/password-reset/confirm', { body: { token: reset, new_password: 'log check passphrase 2' } });
    const session = await login(call, user.email, 'log check passphrase 2');
    secrets.push(reset, 'log check passphrase 1', 'log check passphrase 2', session.access_token, session.refresh_token);
    await eventually(
      async () => (suite.mesh.output('identity').includes('audit: user.password_reset') ? true : undefined),
      'the identity log line of the reset',
    );
    const logs = (['identity', 'gateway', 'keys', 'billing', 'conversations', 'webhooks'] as const).map((c) => suite.mesh.output(c)).join('\n');
    for (const secret of secrets) expect(logs.includes(secret), `a log contains a secret (${secret.slice(0, 6)}…)`).toBe(false);
  });
});

describe('login', () => {
  it('throttles an account after 5 failures: 429 with Retry-After even with the right password', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    for (let attempt = 0; attempt < 5; attempt++) {
      expectErrorBody(await call('POST', '/v1/auth/login', { body: { email: user.email, password: 'wrong password again' } }), 401, 'invalid_credentials');
    }
    // From another address too: the account counter is per account.
    const blocked = await clientFromNewIp()('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } });
    expectErrorBody(blocked, 429, 'too_many_attempts');
    const retryAfter = Number(blocked.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(800);
    expect(retryAfter).toBeLessThanOrEqual(900);
    // An unknown address is throttled exactly the same way (no account enumeration through 429).
    const unknown = `nobody.${user.email}`;
    for (let attempt = 0; attempt < 5; attempt++) await call('POST', '/v1/auth/login', { body: { email: unknown, password: 'wrong password again' } });
    expectErrorBody(await call('POST', '/v1/auth/login', { body: { email: unknown, password: 'wrong password again' } }), 429, 'too_many_attempts');
  });

  it("clears the account's failures, its own attempt included, when the session opens", async () => {
    ipCounter += 1;
    const address = `198.51.100.${ipCounter}`;
    const call = fromAddress(suite.call, address);
    const user = await registered(call);
    const rows = () => suite.db('auth_failures').where({ kind: 'password', scope: 'account', subject: user.email }).count<{ count: string }[]>('* as count');
    for (let attempt = 0; attempt < 4; attempt++) {
      expectErrorBody(await call('POST', '/v1/auth/login', { body: { email: user.email, password: 'wrong password again' } }), 401, 'invalid_credentials');
    }
    expect((await call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } })).status).toBe(200);
    expect(Number((await rows())[0].count)).toBe(0);
    // Four more failures would have locked the account had the first four still counted.
    for (let attempt = 0; attempt < 4; attempt++) await call('POST', '/v1/auth/login', { body: { email: user.email, password: 'wrong password again' } });
    expect((await call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } })).status).toBe(200);
    // The address's counter is not cleared by one good account (a spray would clear itself).
    const ipRows = await suite.db('auth_failures').where({ kind: 'password', scope: 'ip', subject: address }).count<{ count: string }[]>('* as count');
    expect(Number(ipRows[0].count)).toBe(8);
  });

  it('lets at most 5 of a burst of concurrent guesses reach the password check', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => call('POST', '/v1/auth/login', { body: { email: user.email, password: 'parallel wrong guess' } })),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.every((status) => status === 401 || status === 429)).toBe(true);
    expect(statuses.filter((status) => status === 401).length).toBeLessThanOrEqual(5);
  });

  it('grows the lock-out window with the failures of the last 24 hours', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    // Five failures 20 minutes ago (the clock is moved by writing them in the past): no lock now.
    const past = new Date(Date.now() - 20 * 60_000);
    await suite.db('auth_failures').insert(Array.from({ length: 5 }, () => ({ kind: 'password', scope: 'account', subject: user.email, created_at: past })));
    expectErrorBody(await call('POST', '/v1/auth/login', { body: { email: user.email, password: 'wrong password again' } }), 401, 'invalid_credentials');
    for (let attempt = 0; attempt < 4; attempt++) await call('POST', '/v1/auth/login', { body: { email: user.email, password: 'wrong password again' } });
    // Ten failures in 24 hours: the window is 30 minutes instead of 15.
    const blocked = await call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } });
    expectErrorBody(blocked, 429, 'too_many_attempts');
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(1700);
    expect(Number(blocked.headers.get('retry-after'))).toBeLessThanOrEqual(1800);
  });

  it('throttles an address after 50 failures, whatever the account', async () => {
    const call = clientFromNewIp();
    for (let attempt = 0; attempt < 50; attempt++) {
      const response = await call('POST', '/v1/auth/login', { body: { email: `spray${attempt}.${Date.now()}@example.com`, password: 'guess guess guess' } });
      expect(response.status).toBe(401);
    }
    const user = await registered(clientFromNewIp());
    const blocked = await call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } });
    expectErrorBody(blocked, 429, 'too_many_attempts');
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    // The same account from another address is fine.
    await login(clientFromNewIp(), user.email, user.password);
  });

  it('takes similar time for an unknown email and a known one with a wrong password', async () => {
    const call = clientFromNewIp();
    const users = await Promise.all(Array.from({ length: 5 }, () => registered(clientFromNewIp())));
    const known: number[] = [];
    const unknown: number[] = [];
    const timed = async (email: string) => {
      const started = performance.now();
      const response = await call('POST', '/v1/auth/login', { body: { email, password: 'definitely wrong 1' } });
      expect(response.status).toBe(401);
      return performance.now() - started;
    };
    for (const user of users) {
      known.push(await timed(user.email));
      unknown.push(await timed(`ghost.${user.email}`));
    }
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
    const [k, u] = [median(known), median(unknown)];
    expect(Math.abs(k - u), `known ${k.toFixed(1)} ms vs unknown ${u.toFixed(1)} ms`).toBeLessThan(Math.max(25, 0.5 * Math.max(k, u)));
  });
});

describe('races and odd input (found in review)', () => {
  it('gives no lasting session to sign-ins racing a password reset', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    await call('POST', '/v1/auth/password-reset', { body: { email: user.email } });
    const token = tokenOf(await waitForMail(suite.mailbox, user.email, 'password_reset_request'));
    // Sign-ins with the old password run while the reset commits.
    const racing = Array.from({ length: 4 }, () => call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } }));
    const reset = await call('POST', '/v1/auth/password-reset/confirm', { body: { token, new_password: 'a brand new passphrase 42' } });
    expect(reset.status).toBe(204);
    for (const response of await Promise.all(racing)) {
      if (response.status !== 200) {
        expectErrorBody(response, 401, 'invalid_credentials');
        continue;
      }
      // A sign-in that finished before the reset had its session revoked by it.
      const refreshed = await call('POST', '/v1/auth/refresh', { body: { refresh_token: response.json.session.refresh_token } });
      expectErrorBody(refreshed, 401, 'invalid_token');
      expectErrorBody(await call('GET', '/v1/account', { token: response.json.session.access_token }), 401);
    }
  });

  it('logs out the caller, not the owner of a refresh token of someone else', async () => {
    const call = clientFromNewIp();
    const ann = await registered(call);
    const bob = await registered(call);
    const response = await call('POST', '/v1/auth/logout', { token: ann.session.access_token, body: { refresh_token: bob.session.refresh_token } });
    expect(response.status).toBe(204);
    expectErrorBody(await call('GET', '/v1/account', { token: ann.session.access_token }), 401);
    expect((await call('GET', '/v1/account', { token: bob.session.access_token })).status).toBe(200);
  });

  it('answers 202 to a reset request for anything that is not an address, and caps reset mails', async () => {
    const call = clientFromNewIp();
    expect((await call('POST', '/v1/auth/password-reset', { body: { email: 'not an address' } })).status).toBe(202);
    const user = await registered(call);
    for (let i = 0; i < 6; i++) expect((await call('POST', '/v1/auth/password-reset', { body: { email: user.email } })).status).toBe(202);
    await waitForMail(suite.mailbox, user.email, 'password_reset_request', 3);
    // Past three mails in a quarter of an hour the requests are dropped: only three tokens exist.
    await eventually(
      async () => Number((await suite.db('password_resets').where({ user_id: user.userId }).count<{ count: string }[]>('* as count'))[0].count) === 3,
      'three reset tokens',
    );
    expect((await mailsTo(suite.mailbox, user.email)).filter((mail) => mail.kind === 'password_reset_request')).toHaveLength(3);
  });

  it('answers a NUL character or a huge address with a 4xx, never a 500', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    expectErrorBody(
      await call('POST', '/v1/auth/login', { body: { email: `a\u0000${user.email}`, password: 'whatever it is' } }),
      400,
      'invalid_request',
      'email',
    );
    expectErrorBody(
      await call('POST', '/v1/auth/login', { body: { email: `${'a'.repeat(6000)}@example.com`, password: 'whatever it is' } }),
      401,
      'invalid_credentials',
    );
    const odd = await call('GET', '/v1/organizations/org_%00abc', { token: user.session.access_token });
    expect([400, 404]).toContain(odd.status);
    expect(odd.json.error.code).toBeTruthy();
  });
});
