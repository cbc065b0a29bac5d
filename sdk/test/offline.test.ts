import { describe, expect, it, vi } from 'vitest';
import {
  createSwitchboardClient,
  IdempotencyKeyReusedError,
  InsufficientBalanceError,
  InternalServerError,
  NotFoundError,
  PayloadTooLargeError,
  PaymentRequiredError,
  paginate,
  RateLimitError,
  type Session,
  SpendCapExceededError,
  SwitchboardError,
  UnsupportedMediaTypeError,
} from '../src/index.js';

/** The SDK's own logic against a stub fetch: what the mesh cannot be made to do on demand. */

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', 'x-request-id': 'req_test', ...headers } });

const errorBody = (code: string, message = 'no') => ({ error: { code, message, field: null, request_id: 'req_body' } });

describe('SwitchboardError', () => {
  it('reads Retry-After and metadata of a 429', async () => {
    const fetch = async () =>
      json(
        429,
        { error: { code: 'too_many_attempts', message: 'slow down', field: null, request_id: 'req_1', metadata: { retry_after_seconds: 30 } } },
        { 'retry-after': '30' },
      );
    // No retry: the error as it came.
    const sb = createSwitchboardClient({ baseUrl: 'http://gateway.test', fetch, maxRetries: 0 });
    const error = await sb.post('/v1/auth/login', { body: { email: 'a@example.com', password: 'x' } }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error).toBeInstanceOf(SwitchboardError);
    expect((error as SwitchboardError).headers.get('retry-after')).toBe('30');
    expect(error).toMatchObject({
      status: 429,
      code: 'too_many_attempts',
      message: 'slow down',
      requestId: 'req_1',
      retryAfter: 30,
      metadata: { retry_after_seconds: 30 },
    });
  });

  it('describes an answer that is not the contract error body', async () => {
    const fetch = async () => new Response('<html>bad gateway</html>', { status: 502, headers: { 'x-request-id': 'req_proxy' } });
    const sb = createSwitchboardClient({ baseUrl: 'http://gateway.test', fetch });
    const error = await sb.get('/v1/account').catch((err: unknown) => err);
    expect(error).toMatchObject({ status: 502, code: 'http_502', requestId: 'req_proxy', field: null, retryAfter: null });
    expect((error as Error).message).toContain('bad gateway');
  });

  it('is an instance of the class of its code, else of its status', async () => {
    const answers: Array<[number, string, new (...args: never[]) => SwitchboardError]> = [
      [402, 'spend_cap_exceeded', SpendCapExceededError],
      [402, 'insufficient_balance', InsufficientBalanceError],
      [402, 'something_new', PaymentRequiredError],
      [404, 'key_not_found', NotFoundError],
      [413, 'payload_too_large', PayloadTooLargeError],
      [415, 'unsupported_media_type', UnsupportedMediaTypeError],
      [422, 'idempotency_key_reused', IdempotencyKeyReusedError],
      [500, 'internal_error', InternalServerError],
      [418, 'teapot', SwitchboardError],
    ];
    for (const [status, code, Class] of answers) {
      const sb = createSwitchboardClient({ baseUrl: 'http://gateway.test', fetch: async () => json(status, errorBody(code)) });
      const error = await sb.keys.retrieve('key_1').catch((err: unknown) => err);
      expect(error, code).toBeInstanceOf(Class);
      expect(error, code).toMatchObject({ status, code, name: Class.name });
    }
    expect(new SpendCapExceededError({ status: 402, code: 'spend_cap_exceeded', message: 'm' })).toBeInstanceOf(PaymentRequiredError);
  });
});

describe('token refresh', () => {
  it('makes one refresh for concurrent expired calls and sends each body again', async () => {
    const session: Session = { access_token: 'fresh', refresh_token: 'r2', token_type: 'Bearer', expires_in: 900 };
    const seen: Array<{ path: string; auth: string | null; body: string }> = [];
    let releaseRefresh!: () => void;
    const refreshGate = new Promise<void>((resolve) => {
      releaseRefresh = resolve;
    });
    const fetch = vi.fn(async (request: Request) => {
      const path = new URL(request.url).pathname;
      const body = await request.text();
      seen.push({ path, auth: request.headers.get('authorization'), body });
      if (path === '/v1/auth/refresh') {
        await refreshGate;
        return json(200, { session });
      }
      if (request.headers.get('authorization') !== 'Bearer fresh') return json(401, errorBody('token_expired'));
      return json(201, { echo: body });
    });
    const onSession = vi.fn();
    const sb = createSwitchboardClient({ baseUrl: 'http://gateway.test', accessToken: 'stale', refreshToken: 'r1', workspaceId: 'org_1', fetch, onSession });
    const calls = ['a', 'b', 'c'].map((name) => sb.post('/v1/keys', { body: { name } }));
    // Let every call meet its 401 before the refresh answers.
    await vi.waitFor(() => expect(seen.filter((s) => s.path === '/v1/keys')).toHaveLength(3));
    releaseRefresh();
    const answers = (await Promise.all(calls)) as unknown as Array<{ echo: string }>;
    expect(answers.map((a) => JSON.parse(a.echo).name)).toEqual(['a', 'b', 'c']);
    const refreshes = seen.filter((s) => s.path === '/v1/auth/refresh');
    expect(refreshes).toEqual([{ path: '/v1/auth/refresh', auth: null, body: JSON.stringify({ refresh_token: 'r1' }) }]);
    expect(onSession).toHaveBeenCalledTimes(1);
    expect(onSession).toHaveBeenCalledWith(session);
    const retried = seen.filter((s) => s.path === '/v1/keys' && s.auth === 'Bearer fresh');
    expect(retried.map((s) => JSON.parse(s.body).name).sort()).toEqual(['a', 'b', 'c']);
    expect(fetch).toHaveBeenCalledTimes(7);
  });

  it('in the cookie mode, says so on every request and renews from the cookie without holding a refresh token', async () => {
    const seen: Array<{ path: string; mode: string | null; body: string }> = [];
    const fetch = vi.fn(async (request: Request) => {
      const path = new URL(request.url).pathname;
      seen.push({ path, mode: request.headers.get('x-switchboard-session'), body: await request.text() });
      if (path === '/v1/auth/login') return json(200, { session: { access_token: 'first', token_type: 'Bearer', expires_in: 900 } });
      if (path === '/v1/auth/refresh') return json(200, { session: { access_token: 'fresh', token_type: 'Bearer', expires_in: 900 } });
      if (request.headers.get('authorization') !== 'Bearer fresh') return json(401, errorBody('token_expired'));
      return json(200, { user_id: 'usr_1' });
    });
    const sb = createSwitchboardClient({ baseUrl: 'http://gateway.test', sessionCookie: true, fetch });
    await sb.signIn({ email: 'a@example.com', password: 'x' });
    expect(sb.credentials()).toEqual({ accessToken: 'first', refreshToken: undefined, apiKey: undefined });
    expect(await sb.get('/v1/account')).toEqual({ user_id: 'usr_1' });
    expect(seen.map(({ path, mode }) => [path, mode])).toEqual([
      ['/v1/auth/login', 'cookie'],
      ['/v1/account', 'cookie'],
      ['/v1/auth/refresh', 'cookie'],
      ['/v1/account', 'cookie'],
    ]);
    expect(seen[2].body).toBe('{}');

    // A dead cookie: the refresh's 401 forgets the access token too.
    fetch.mockImplementation(async () => json(401, errorBody('invalid_token')));
    await expect(sb.auth.refresh()).rejects.toMatchObject({ code: 'invalid_token' });
    expect(sb.credentials().accessToken).toBeUndefined();
  });

  it('does not refresh for API keys, and never retries twice', async () => {
    const fetch = vi.fn(async () => json(401, errorBody('token_expired')));
    const withKey = createSwitchboardClient({ baseUrl: 'http://gateway.test', apiKey: 'sb_x', refreshToken: 'r1', fetch });
    await expect(withKey.get('/v1/account')).rejects.toMatchObject({ code: 'token_expired' });
    expect(fetch).toHaveBeenCalledTimes(1);

    // A refreshed token that is refused as expired again ends with that answer, not a loop.
    const session: Session = { access_token: 'fresh', refresh_token: 'r2', token_type: 'Bearer', expires_in: 900 };
    const always = vi.fn(async (request: Request) =>
      new URL(request.url).pathname === '/v1/auth/refresh' ? json(200, { session }) : json(401, errorBody('token_expired')),
    );
    const sb = createSwitchboardClient({ baseUrl: 'http://gateway.test', accessToken: 'stale', refreshToken: 'r1', fetch: always });
    await expect(sb.get('/v1/account')).rejects.toMatchObject({ code: 'token_expired' });
    expect(always).toHaveBeenCalledTimes(3);
  });
});

describe('auth.resendVerificationEmail', () => {
  it('asks for a new verification mail and resolves to the 202 body', async () => {
    const seen: Array<[string, string, string]> = [];
    const fetch = async (request: Request) => {
      seen.push([request.method, new URL(request.url).pathname, await request.text()]);
      return json(202, {});
    };
    const sb = createSwitchboardClient({ baseUrl: 'http://gateway.test', fetch });
    await expect(sb.auth.resendVerificationEmail({ email: 'a@example.com' })).resolves.toEqual({});
    expect(seen).toEqual([['POST', '/v1/auth/verify-email/resend', '{"email":"a@example.com"}']]);
  });
});

describe('paginate', () => {
  it('stops on a page that claims more without a cursor', async () => {
    const pages = paginate(async () => ({ data: [1], has_more: true, next_cursor: null }));
    await expect(pages.collect()).rejects.toThrow(/no next_cursor/);
  });

  it('fetches nothing until iterated, and starts again on each iteration', async () => {
    const fetchPage = vi.fn(async (after: string | undefined) =>
      after ? { data: [3], has_more: false, next_cursor: null } : { data: [1, 2], has_more: true, next_cursor: 'c1' },
    );
    const pages = paginate(fetchPage);
    expect(fetchPage).not.toHaveBeenCalled();
    expect(await pages.collect()).toEqual([1, 2, 3]);
    expect(await pages.collect()).toEqual([1, 2, 3]);
    expect(fetchPage.mock.calls.map(([after]) => after)).toEqual([undefined, 'c1', undefined, 'c1']);
  });
});
