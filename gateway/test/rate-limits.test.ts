import { type ApiResponse, expectErrorBody, fromAddress, meshSuiteOfFile, signUp } from '@switchboard/testkit/mesh';
import { describe, expect, it } from 'vitest';

/**
 * The REST rate limits (docs/conventions.md#rate-limits) with low limits: 5 requests a minute per
 * principal, 3 per client address without credentials. The gateway trusts the test's
 * X-Forwarded-For, so each test acts from addresses of its own.
 */
const suite = meshSuiteOfFile(() => ({
  REST_RATE_LIMIT_PER_MINUTE: '5',
  REST_RATE_LIMIT_PER_IP_PER_MINUTE: '3',
  GATEWAY_TRUSTED_PROXIES: '127.0.0.1,::1',
}));

/** The members of the RateLimit header, e.g. `"default";r=4;t=60`. */
function rateLimitOf(response: ApiResponse): { r: number; t: number } {
  const match = /^"default";r=(\d+);t=(\d+)$/.exec(response.headers.get('ratelimit') ?? '');
  expect(match, `RateLimit: ${response.headers.get('ratelimit')}`).not.toBeNull();
  return { r: Number(match![1]), t: Number(match![2]) };
}

describe('REST rate limits', () => {
  it('limits a user per minute with the IETF headers, then 429 rate_limited with Retry-After; another user and an API key have their own', async () => {
    const [alice, bob] = [await signUp(fromAddress(suite.call, '198.51.100.1')), await signUp(fromAddress(suite.call, '198.51.100.2'))];
    for (let remaining = 4; remaining >= 0; remaining--) {
      const response = await suite.call('GET', '/v1/account', { token: alice.token });
      expect(response.status, response.text).toBe(200);
      expect(response.headers.get('ratelimit-policy')).toBe('"default";q=5;w=60');
      const { r, t } = rateLimitOf(response);
      expect(r).toBe(remaining);
      expect(t).toBeGreaterThanOrEqual(1);
      expect(t).toBeLessThanOrEqual(60);
    }
    const refused = await suite.call('GET', '/v1/account', { token: alice.token });
    expectErrorBody(refused, 429, 'rate_limited', null);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.json.error.metadata).toEqual({ retry_after_seconds: retryAfter });
    expect(rateLimitOf(refused)).toEqual({ r: 0, t: retryAfter });
    // Refused whatever the route: the limit is the principal's.
    expectErrorBody(await suite.call('POST', '/v1/keys', { token: alice.token, body: { name: 'late' } }), 429, 'rate_limited');

    const bobs = await suite.call('GET', '/v1/account', { token: bob.token });
    expect(bobs.status).toBe(200);
    expect(rateLimitOf(bobs).r).toBe(4);
    // An API key is a principal of its own, apart from the user who created it.
    const created = await suite.call('POST', '/v1/keys', { token: bob.token, body: { name: 'own limit' } });
    expect(created.status, created.text).toBe(201);
    const byKey = await suite.call('GET', '/v1/account', { token: created.json.full_key });
    expect(byKey.status).toBe(200);
    expect(rateLimitOf(byKey).r).toBe(4);
  });

  it('limits calls without credentials per client address; authenticated calls from that address are not counted there', async () => {
    const user = await signUp(fromAddress(suite.call, '198.51.100.3'));
    const office = fromAddress(suite.call, '203.0.113.7');
    for (let remaining = 2; remaining >= 0; remaining--) {
      const response = await office('GET', '/v1/.well-known/jwks.json');
      expect(response.status).toBe(200);
      expect(response.headers.get('ratelimit-policy')).toBe('"default";q=3;w=60');
      expect(rateLimitOf(response).r).toBe(remaining);
    }
    const refused = await office('GET', '/v1/.well-known/jwks.json');
    expectErrorBody(refused, 429, 'rate_limited');
    expect(Number(refused.headers.get('retry-after'))).toBe(refused.json.error.metadata.retry_after_seconds);
    expectErrorBody(await office('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } }), 429, 'rate_limited');

    expect((await fromAddress(suite.call, '203.0.113.8')('GET', '/v1/.well-known/jwks.json')).status).toBe(200);
    const signedIn = await office('GET', '/v1/account', { token: user.token });
    expect(signedIn.status).toBe(200);
    expect(signedIn.headers.get('ratelimit-policy')).toBe('"default";q=5;w=60');
  });

  it('counts refused credentials for the client address: a flood of made-up tokens is slowed', async () => {
    const client = fromAddress(suite.call, '203.0.113.10');
    for (let remaining = 2; remaining >= 0; remaining--) {
      const refused = await client('GET', '/v1/account', { token: 'sb_made_up_key' });
      expectErrorBody(refused, 401);
      expect(refused.headers.get('ratelimit-policy')).toBe('"default";q=3;w=60');
      expect(rateLimitOf(refused).r).toBe(remaining);
    }
    expectErrorBody(await client('GET', '/v1/account', { token: 'sb_made_up_key' }), 429, 'rate_limited');
  });

  it('never limits health, readiness, the OpenAPI document, /docs or the dashboard, and sets no RateLimit headers there', async () => {
    const client = fromAddress(suite.call, '203.0.113.9');
    for (let i = 0; i < 3; i++) expect((await client('GET', '/v1/.well-known/jwks.json')).status).toBe(200);
    expectErrorBody(await client('GET', '/v1/.well-known/jwks.json'), 429, 'rate_limited');
    for (const path of ['/healthz', '/readyz?scope=self', '/v1/openapi.json', '/docs', '/app/']) {
      for (let i = 0; i < 5; i++) {
        const response = await client('GET', path);
        expect(response.status, path).toBe(200);
        expect(response.headers.get('ratelimit-policy'), path).toBeNull();
        expect(response.headers.get('ratelimit'), path).toBeNull();
      }
    }
  });
});
