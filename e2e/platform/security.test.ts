import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { eventually, expectErrorBody, tokenOf, waitForMail } from '@switchboard/testkit/account-helpers';
import { bootMesh, fromAddress, newUser, type RestCall, restClient } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The fixes of the security review (OWASP ASVS 5, level 2) through the REST surface: rate limits
 * of expensive actions, client addresses behind trusted proxies, response headers, audit lines,
 * and reset tokens that die on a password change. The mesh runs with the default limits but
 * the registration one, which is small here so the test can reach it.
 */

let mesh: Mesh;
let base: RestCall;
let ipCounter = 0;
const registrationsPerIp = 3;
// Counters live in the run's database, which other files share: this file's addresses are its own.
const subnet = `198.18.${Math.floor(Math.random() * 250)}`;
const ipv6Prefix = `2001:db8:${Math.floor(Math.random() * 0xffff).toString(16)}`;

beforeAll(async () => {
  mesh = await bootMesh({
    GATEWAY_TRUSTED_PROXIES: '127.0.0.1,::1',
    REGISTRATIONS_PER_IP_PER_HOUR: String(registrationsPerIp),
    ORGANIZATIONS_PER_USER_PER_HOUR: '2',
    INVITATIONS_PER_USER_PER_HOUR: '2',
  });
  base = restClient(mesh.gatewayUrl);
});

afterAll(async () => {
  await mesh?.stop();
});

function clientFromNewIp(): RestCall {
  ipCounter += 1;
  return fromAddress(base, `${subnet}.${ipCounter}`);
}

async function registered(call: RestCall) {
  const user = newUser();
  const response = await call('POST', '/v1/auth/register', { body: user });
  expect(response.status, response.text).toBe(201);
  return { ...user, userId: response.json.user.user_id as string, token: response.json.session.access_token as string };
}

/** The audit lines a component logged (JSON lines with `audit: true`). */
function auditLines(component: 'identity' | 'gateway'): Array<Record<string, unknown>> {
  return mesh
    .output(component)
    .split('\n')
    .filter((line) => line.includes('"audit":true'))
    .map((line) => JSON.parse(line.slice(line.indexOf('{'))));
}

describe('rate limits of expensive actions', () => {
  it('limits registrations per client address, with 429 rate_limited and Retry-After', async () => {
    const call = clientFromNewIp();
    for (let i = 0; i < registrationsPerIp; i++) await registered(call);
    const refused = await call('POST', '/v1/auth/register', { body: newUser() });
    expectErrorBody(refused, 429, 'rate_limited');
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(3000);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    // Another address is not affected.
    await registered(clientFromNewIp());
  });

  it('counts IPv6 clients by their /64', async () => {
    for (let i = 0; i < registrationsPerIp; i++) await registered(fromAddress(base, `${ipv6Prefix}:7::${i + 1}`));
    expectErrorBody(await fromAddress(base, `${ipv6Prefix}:7:ffff::9`)('POST', '/v1/auth/register', { body: newUser() }), 429, 'rate_limited');
    await registered(fromAddress(base, `${ipv6Prefix}:8::1`));
  });

  it('limits organizations and invitations per user', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    for (const name of ['one', 'two']) expect((await call('POST', '/v1/organizations', { token: user.token, body: { name } })).status).toBe(201);
    expectErrorBody(await call('POST', '/v1/organizations', { token: user.token, body: { name: 'three' } }), 429, 'rate_limited');
    const org = user; // invitations to the personal workspace
    const path = `/v1/organizations/${(await call('GET', '/v1/account', { token: org.token })).json.personal_workspace_id}/invitations`;
    for (const n of [1, 2])
      expect((await call('POST', path, { token: user.token, body: { email: `guest${n}.${user.email}`, role: 'developer' } })).status).toBe(201);
    expectErrorBody(await call('POST', path, { token: user.token, body: { email: `guest3.${user.email}`, role: 'developer' } }), 429, 'rate_limited');
  });

  it('counts a login with an over-long email against the client address', async () => {
    const call = clientFromNewIp();
    const longEmail = `${'a'.repeat(400)}@example.com`;
    // 50 failures from one address (docs/api/identity.md#sign-in-throttling) lock the address, whatever the email (in waves
    // the argon2 queue admits).
    for (let wave = 0; wave < 5; wave++) {
      const guesses = await Promise.all(
        Array.from({ length: 10 }, () => call('POST', '/v1/auth/login', { body: { email: longEmail, password: 'guess guess guess' } })),
      );
      for (const guess of guesses) expect(guess.status, guess.text).toBe(401);
    }
    expectErrorBody(await call('POST', '/v1/auth/login', { body: { email: longEmail, password: 'guess guess guess' } }), 429, 'too_many_attempts');
    expectErrorBody(await call('POST', '/v1/auth/login', { body: { email: 'someone@example.com', password: 'guess guess guess' } }), 429, 'too_many_attempts');
  });
});

describe('client addresses', () => {
  it('believes X-Forwarded-For only as far as the trusted proxies go', async () => {
    // The gateway trusts 127.0.0.1 (the test's socket): the hop it added names the client; a
    // spoofed entry further left is never read.
    const call = fromAddress(base, '1.2.3.4, 198.51.100.250');
    await call('GET', '/v1/account');
    const line = await eventually(
      () =>
        mesh
          .output('gateway')
          .split('\n')
          .find((l) => l.includes('"route":"/v1/account"') && l.includes('198.51.100.250')),
      'the request line',
    );
    expect(line).not.toContain('1.2.3.4');
  });
});

describe('response headers', () => {
  it('sends nosniff, no referrer and a deny-all CSP on every API answer, errors included', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    for (const response of [
      await call('GET', '/v1/account', { token: user.token }),
      await call('GET', '/v1/account'),
      await call('GET', '/v1/nothing-here'),
      await call('DELETE', '/v1/auth/login'),
      await call('GET', '/healthz'),
    ]) {
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      expect(response.headers.get('referrer-policy')).toBe('no-referrer');
      expect(response.headers.get('content-security-policy')).toBe("default-src 'none'; frame-ancestors 'none'");
      expect(response.headers.get('strict-transport-security')).toBeNull();
    }
    // The HTML page has a policy that lets it run.
    const docs = await call('GET', '/docs');
    expect(docs.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(docs.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('sends HSTS when a trusted proxy says the request came over HTTPS, and only then', async () => {
    expect((await base('GET', '/healthz', { headers: { 'x-forwarded-proto': 'https' } })).headers.get('strict-transport-security')).toBe(
      'max-age=31536000; includeSubDomains',
    );
    expect((await base('GET', '/healthz', { headers: { 'x-forwarded-proto': 'http' } })).headers.get('strict-transport-security')).toBeNull();
  });
});

describe('audit lines', () => {
  it('logs sign-ins, failures, refusals and credential changes with user, address and request id, never a secret', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    const wrong = await call('POST', '/v1/auth/login', { body: { email: user.email, password: 'not the password at all' } });
    expect(wrong.status).toBe(401);
    const ok = await call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } });
    expect(ok.status).toBe(200);
    const token = ok.json.session.access_token as string;
    expect((await call('POST', '/v1/account/2fa/enroll', { token, body: { password: 'still not the password' } })).status).toBe(403);
    const changed = await call('POST', '/v1/account/password', { token, body: { current_password: user.password, new_password: 'a brand new passphrase' } });
    expect(changed.status).toBe(204);
    const ip = `${subnet}.${ipCounter}`;
    const lines = await eventually(() => {
      const found = auditLines('identity').filter((line) => line.user_id === user.userId);
      return found.some((line) => line.event === 'user.password_changed') ? found : undefined;
    }, 'the audit lines of the user');
    const summary = lines.map((line) => `${line.event} ${line.outcome}`);
    expect(summary).toEqual(
      expect.arrayContaining(['user.sign_in_failed failure', 'user.signed_in success', 'reauthentication failure', 'user.password_changed success']),
    );
    for (const line of lines) {
      expect(line.ip).toBe(ip);
      expect(line.request_id).toEqual(expect.stringMatching(/\S/));
    }
    expect(lines.find((line) => line.outcome === 'failure' && line.event === 'user.sign_in_failed')?.reason).toBe('wrong_password');
    const text = mesh.output('identity') + mesh.output('gateway');
    for (const secret of [user.password, 'not the password at all', 'still not the password', 'a brand new passphrase', token])
      expect(text).not.toContain(secret);
  });

  it('logs refused authorizations and the principal of each request line', async () => {
    const call = clientFromNewIp();
    const owner = await registered(call);
    const outsider = await registered(call);
    const orgId = (await call('POST', '/v1/organizations', { token: owner.token, body: { name: 'Audited' } })).json.organization.org_id;
    const path = `/v1/organizations/${orgId}/invitations`;
    const invited = await call('POST', path, { token: owner.token, body: { email: outsider.email, role: 'developer' } });
    expect(invited.status).toBe(201);
    const accepted = await call('POST', '/v1/invitations/accept', {
      token: outsider.token,
      body: { token: tokenOf(await waitForMail(mesh.env.MAILBOX_DIR, outsider.email, 'invitation')) },
    });
    expect(accepted.status, accepted.text).toBe(200);
    expect((await call('DELETE', `/v1/organizations/${orgId}`, { token: outsider.token })).status).toBe(403);
    const refusal = await eventually(
      // A refusal in a workspace is an access.denied record of the audit log, and its line.
      () => auditLines('identity').find((line) => line.event === 'access.denied' && line.user_id === outsider.userId),
      'the refusal audit line',
    );
    expect(refusal).toMatchObject({ outcome: 'denied', reason: 'organization.delete', role: 'developer', ip: `${subnet}.${ipCounter}` });
    const requestLine = await eventually(
      () =>
        mesh
          .output('gateway')
          .split('\n')
          .find((line) => line.includes(`"user_id":"${outsider.userId}"`) && line.includes('"status":403')),
      'the request line of the refused call',
    );
    expect(requestLine).toContain('"principal_type":"user"');
    expect(requestLine).toContain(`"client_ip":"${subnet}.${ipCounter}"`);
  });
});

describe('password reset tokens', () => {
  it('die when the password changes another way before they are used', async () => {
    const call = clientFromNewIp();
    const user = await registered(call);
    await call('POST', '/v1/auth/password-reset', { body: { email: user.email } });
    const token = tokenOf(await waitForMail(mesh.env.MAILBOX_DIR, user.email, 'password_reset_request'));
    const changed = await call('POST', '/v1/account/password', {
      token: user.token,
      body: { current_password: user.password, new_password: 'changed the normal way' },
    });
    expect(changed.status).toBe(204);
    expectErrorBody(
      await call('POST', '/v1/auth/password-reset/confirm', { body: { token, new_password: 'an attacker would like this' } }),
      400,
      'invalid_token',
    );
    expect((await call('POST', '/v1/auth/login', { body: { email: user.email, password: 'changed the normal way' } })).status).toBe(200);
  });
});
