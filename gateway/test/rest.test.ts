import net from 'node:net';
import { eventually } from '@switchboard/runtime/testing';
import { expectErrorBody, meshSuiteOfFile, newUser } from '@switchboard/testkit/mesh';
import { describe, expect, it } from 'vitest';

const suite = meshSuiteOfFile();

describe('the account walk-through through REST', () => {
  it('registers, logs in and reads the account', async () => {
    const user = newUser();
    const registered = await suite.call('POST', '/v1/auth/register', { body: user });
    expect(registered.status).toBe(201);
    expect(registered.json.user).toMatchObject({
      user_id: expect.stringMatching(/^usr_/),
      email: user.email,
      email_verified: false,
      full_name: user.full_name,
      two_factor_enabled: false,
      personal_workspace_id: expect.stringMatching(/^org_/),
    });
    expect(registered.json.session).toMatchObject({ token_type: 'Bearer', expires_in: 900 });

    const login = await suite.call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } });
    expect(login.status).toBe(200);
    expect(Object.keys(login.json)).toEqual(['session']);

    const account = await suite.call('GET', '/v1/account', { token: login.json.session.access_token });
    expect(account.status).toBe(200);
    expect(account.json).toEqual(registered.json.user);

    // The unversioned alias answers the same.
    const alias = await suite.call('GET', '/account', { token: login.json.session.access_token });
    expect(alias.json).toEqual(registered.json.user);
  });

  it('refuses a wrong password with the same body as an unknown email', async () => {
    const user = newUser();
    await suite.call('POST', '/v1/auth/register', { body: user });
    const wrong = await suite.call('POST', '/v1/auth/login', { body: { email: user.email, password: 'not the password at all' } });
    const unknown = await suite.call('POST', '/v1/auth/login', { body: { email: `nobody-${user.email}`, password: 'not the password at all' } });
    expectErrorBody(wrong, 401, 'invalid_credentials');
    expectErrorBody(unknown, 401, 'invalid_credentials');
    expect({ ...wrong.json.error, request_id: '' }).toEqual({ ...unknown.json.error, request_id: '' });
  });

  it('keeps passwords and tokens out of every log', async () => {
    const user = newUser();
    const registered = await suite.call('POST', '/v1/auth/register', { body: user });
    const login = await suite.call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } });
    const account = await suite.call('GET', '/v1/account', { token: login.json.session.access_token });
    // Log lines come through pipes: wait until the gateway's line of the last request is in.
    await eventually(() => suite.mesh.output('gateway').includes(account.headers.get('x-request-id')!), 'the gateway log of the last request');
    const logs = ['identity', 'gateway', 'keys', 'billing', 'conversations', 'webhooks'].map((c) => suite.mesh.output(c as never)).join('\n');
    expect(logs).toContain(registered.headers.get('x-request-id'));
    for (const secret of [
      user.password,
      registered.json.session.access_token,
      registered.json.session.refresh_token,
      login.json.session.access_token,
      login.json.session.refresh_token,
    ]) {
      expect(logs).not.toContain(secret);
    }
  });
});

describe('authentication', () => {
  it('needs credentials on protected routes', async () => {
    expectErrorBody(await suite.call('GET', '/v1/account'), 401, 'unauthenticated');
    expectErrorBody(await suite.call('GET', '/v1/account', { token: 'not-a-jwt' }), 401, 'invalid_token');
    expectErrorBody(await suite.call('GET', '/v1/account', { headers: { authorization: 'Basic abc' } }), 401);
  });

  it('answers 404 for a workspace the user is not a member of', async () => {
    const user = newUser();
    const registered = await suite.call('POST', '/v1/auth/register', { body: user });
    const other = await suite.call('POST', '/v1/auth/register', { body: newUser() });
    const response = await suite.call('GET', '/v1/account', {
      token: registered.json.session.access_token,
      headers: { 'x-workspace-id': other.json.user.personal_workspace_id },
    });
    expectErrorBody(response, 404, 'workspace_not_found');
  });
});

describe('the error model', () => {
  it('answers malformed JSON with 400', async () => {
    const response = await suite.call('POST', '/v1/auth/login', { rawBody: '{"email": ', headers: { 'content-type': 'application/json' } });
    expectErrorBody(response, 400, 'invalid_json');
  });

  it('names the field of a wrong type', async () => {
    const response = await suite.call('POST', '/v1/auth/register', { body: { email: 42, password: 'x' } });
    expectErrorBody(response, 400);
    expect(response.json.error.field).toBe('email');
  });

  it('refuses a body that is not JSON with 415', async () => {
    const response = await suite.call('POST', '/v1/auth/login', { rawBody: 'email=a', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expectErrorBody(response, 415, 'unsupported_media_type');
  });

  it('refuses a body over 1 MiB with 413', async () => {
    const big = JSON.stringify({ email: 'a@example.com', password: 'x'.repeat(1024 * 1024) });
    expectErrorBody(await suite.call('POST', '/v1/auth/login', { rawBody: big, headers: { 'content-type': 'application/json' } }), 413, 'payload_too_large');
  });

  it('answers an unknown route with 404 and a wrong method with 405', async () => {
    expectErrorBody(await suite.call('GET', '/v1/nothing-here'), 404, 'route_not_found');
    const wrongMethod = await suite.call('DELETE', '/v1/auth/login');
    expectErrorBody(wrongMethod, 405, 'method_not_allowed');
    expect(wrongMethod.headers.get('allow')).toBe('POST');
  });

  it('keeps a request id the client sends', async () => {
    const response = await suite.call('GET', '/v1/nothing-here', { headers: { 'x-request-id': 'client-chosen-id-1' } });
    expect(response.headers.get('x-request-id')).toBe('client-chosen-id-1');
    expect(response.json.error.request_id).toBe('client-chosen-id-1');
  });
});

describe('HTTP edge cases', () => {
  /** Sends raw bytes to the gateway and returns the raw answer. */
  function raw(request: string): Promise<string> {
    const { port } = new URL(suite.mesh.gatewayUrl);
    return new Promise((resolve, reject) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(request));
      let answer = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk) => (answer += chunk));
      socket.on('end', () => resolve(answer));
      socket.on('error', reject);
    });
  }

  it('answers HEAD like GET, without a body', async () => {
    const response = await suite.call('HEAD', '/healthz');
    expect(response.status).toBe(200);
    expect(response.text).toBe('');
  });

  it('never reads a host out of the path', async () => {
    expectErrorBody(await suite.call('GET', '//evil.example/keys'), 404, 'route_not_found');
  });

  it('answers malformed HTTP and oversized headers with the error body', async () => {
    const malformed = await raw('GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n');
    expect(malformed).toMatch(/^HTTP\/1\.1 400/);
    expect(malformed).toMatch(/X-Request-Id: req_/i);
    expect(malformed).toContain('"code":"invalid_request"');
    const huge = await raw(`GET /healthz?${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(huge).toMatch(/^HTTP\/1\.1 431/);
    expect(huge).toContain('"code":"headers_too_large"');
  });
});

describe('health and documents', () => {
  it('serves health, readiness, the OpenAPI document and the docs page', async () => {
    expect((await suite.call('GET', '/healthz')).status).toBe(200);
    const ready = await suite.call('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json.services).toEqual({
      identity: 'serving',
      keys: 'serving',
      billing: 'serving',
      conversations: 'serving',
      webhooks: 'serving',
      'data-plane': 'serving',
    });
    const openapi = await suite.call('GET', '/v1/openapi.json');
    expect(openapi.status).toBe(200);
    expect(openapi.json.openapi).toMatch(/^3\.1\./);
    expect(openapi.json.paths['/v1/auth/register'].post).toBeTruthy();
    const docs = await suite.call('GET', '/docs');
    expect(docs.status).toBe(200);
    expect(docs.headers.get('content-type')).toMatch(/text\/html/);
  });
});

describe('a service outage', () => {
  it('answers 503 quickly while a service is down, and recovers when it is back', async () => {
    const registered = await suite.call('POST', '/v1/auth/register', { body: newUser() });
    const conversations = async () => suite.call('GET', '/v1/conversations', { token: registered.json.session.access_token });
    expect((await conversations()).status).toBe(200);
    await suite.mesh.stopComponent('conversations');
    const started = Date.now();
    const response = await conversations();
    expect(Date.now() - started).toBeLessThan(5000);
    expectErrorBody(response, 503, 'service_unavailable');
    const ready = await suite.call('GET', '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.json.services.conversations).toBe('unreachable');
    await suite.mesh.startComponent('conversations');
    expect((await conversations()).status).toBe(200);
  });
});
