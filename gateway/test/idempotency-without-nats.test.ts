import { freePort } from '@switchboard/runtime/infra';
import { expectErrorBody, meshSuiteOfFile, signUp } from '@switchboard/testkit/mesh';
import { describe, expect, it } from 'vitest';

/**
 * Idempotency-Key while NATS, where the answers are kept, is unreachable
 * (docs/conventions.md#idempotency): a POST with the header is a 503 at once, never run
 * unprotected; without the header nothing changes.
 */

// Nothing listens there: every component runs with NATS unreachable.
const suite = meshSuiteOfFile(async () => ({ NATS_URL: `nats://127.0.0.1:${await freePort()}` }));

describe('Idempotency-Key without NATS', () => {
  it('answers 503 with Retry-After to a POST with the header and runs nothing; a POST without it is served', async () => {
    const user = await signUp(suite.call);
    const started = Date.now();
    const refused = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'protected' }, headers: { 'idempotency-key': 'offline-1' } });
    expectErrorBody(refused, 503, 'service_unavailable', null);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(Date.now() - started).toBeLessThan(3000);
    expect((await suite.call('GET', '/v1/keys', { token: user.token })).json.data).toEqual([]);

    const plain = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'plain' } });
    expect(plain.status, plain.text).toBe(201);
  });

  it('still checks the header first: a malformed one is a 400', async () => {
    const user = await signUp(suite.call);
    const response = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'x' }, headers: { 'idempotency-key': '' } });
    expectErrorBody(response, 400, 'invalid_request', 'Idempotency-Key');
  });
});
