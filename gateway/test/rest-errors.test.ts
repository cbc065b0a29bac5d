import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ApiError } from '@switchboard/runtime/api-error';
import { catalogued, errorCatalogue } from '@switchboard/runtime/error-catalogue';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maxBodyBytes } from '../src/rest.js';
import { servicelessGateway } from './serviceless-gateway.js';

/**
 * The errors rest.ts answers before any service is called, in process: each answer is the entry
 * of the error catalogue (status, code, message), the same one the OpenAPI document describes
 * (docs/conventions.md#errors). No service is reached, so none runs.
 */

let server: http.Server;
let base: string;

beforeAll(async () => {
  server = http.createServer(servicelessGateway());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** The answer to a request, with the body's request id left out. */
async function answer(method: string, path: string, init: { body?: string; headers?: Record<string, string> } = {}) {
  const response = await fetch(`${base}${path}`, { method, body: init.body, headers: init.headers });
  const { error } = (await response.json()) as { error: { message: string; request_id: string } };
  expect(error.request_id).toBe(response.headers.get('x-request-id'));
  return { status: response.status, error: { ...error, request_id: '' }, headers: response.headers };
}

/** The answer the catalogue says it is. */
const expected = (err: ApiError) => ({ status: err.status, error: err.body('').error });

describe('the errors rest.ts answers, read from the error catalogue', () => {
  it('answers a body that is not JSON, not sent as JSON or too large with their entries', async () => {
    const json = { 'content-type': 'application/json' };
    const invalid = await answer('POST', '/v1/auth/login', { body: '{"email": ', headers: json });
    expect({ status: invalid.status, error: invalid.error }).toEqual(expected(catalogued(errorCatalogue.invalidJson)));

    const form = await answer('POST', '/v1/auth/login', { body: 'email=a', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect({ status: form.status, error: form.error }).toEqual(expected(catalogued(errorCatalogue.unsupportedMediaType)));

    const big = await answer('POST', '/v1/auth/login', { body: JSON.stringify({ password: 'x'.repeat(maxBodyBytes) }), headers: json });
    expect({ status: big.status, error: big.error }).toEqual(expected(catalogued(errorCatalogue.payloadTooLarge, { limitBytes: maxBodyBytes })));
    expect(big.error.message).toBe('The request body is larger than 1048576 bytes.');
  });

  it('answers an unknown path and a wrong method with their entries, the 405 with Allow', async () => {
    const none = await answer('GET', '/v1/nothing-here');
    expect({ status: none.status, error: none.error }).toEqual(expected(catalogued(errorCatalogue.routeNotFound, { method: 'GET', path: '/v1/nothing-here' })));
    expect(none.error.message).toBe('No route for GET /v1/nothing-here.');

    const wrong = await answer('DELETE', '/v1/auth/login');
    expect({ status: wrong.status, error: wrong.error }).toEqual(
      expected(catalogued(errorCatalogue.methodNotAllowed, { method: 'DELETE', allowed: ['POST'] })),
    );
    expect(wrong.error.message).toBe('DELETE is not allowed here; use POST.');
    expect(wrong.headers.get('allow')).toBe('POST');
  });

  it('answers missing or malformed credentials with the unauthenticated entry and WWW-Authenticate', async () => {
    for (const headers of [{}, { authorization: 'Basic abc' }] as Record<string, string>[]) {
      const refused = await answer('GET', '/v1/account', { headers });
      const headerSent = 'authorization' in headers;
      expect({ status: refused.status, error: refused.error }).toEqual(expected(catalogued(errorCatalogue.unauthenticated, { headerSent })));
      expect(refused.headers.get('www-authenticate')).toBe('Bearer');
    }
  });
});
