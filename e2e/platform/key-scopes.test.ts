import { buildRoutes } from '@switchboard/gateway/routes';
import { eventually } from '@switchboard/runtime/testing';
import { expectErrorBody, meshSuiteOfFile, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import { beforeAll, describe, expect, it } from 'vitest';

/**
 * An API key with the `inference` scope only (docs/api/keys.md#scopes), through the gateway: the model
 * requests and what they need work, and every other route of the REST surface, enumerated from
 * the routes the gateway builds, is refused with 403 `insufficient_scope` naming the scope it
 * needs (or `user_session_required` where only a user's session will do), before anything runs.
 */

// The demo upstream answers the model requests (docs/api/front-door.md#the-demo-upstream).
const suite = meshSuiteOfFile(() => ({ DEMO_UPSTREAM: 'true' }));

let owner: SignedUp;
let inferenceKey: { keyId: string; fullKey: string };

beforeAll(async () => {
  owner = await signUp(suite.call);
  const created = await suite.call('POST', '/v1/keys', { token: owner.token, body: { name: 'inference only', scopes: ['inference'] } });
  expect(created.status, created.text).toBe(201);
  expect(created.json.key.scopes).toEqual(['inference']);
  inferenceKey = { keyId: created.json.key.key_id, fullKey: created.json.full_key };
});

/** The routes an API key may not call with `inference` alone. */
const routes = buildRoutes().filter((route) => route.credentials !== 'none' && !route.acceptedScopes.includes('inference'));

describe('a key with the inference scope only', () => {
  it('makes model requests: chat completions and the model list', async () => {
    const headers = { authorization: `Bearer ${inferenceKey.fullKey}`, 'content-type': 'application/json' };
    const completion = await fetch(`${suite.mesh.gatewayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ model: 'service/fast', messages: [{ role: 'user', content: 'Hello' }] }),
    });
    const text = await completion.text();
    expect(completion.status, text).toBe(200);
    expect(JSON.parse(text)).toMatchObject({ object: 'chat.completion', choices: [expect.objectContaining({ message: expect.any(Object) })] });
    const models = await fetch(`${suite.mesh.gatewayUrl}/v1/models`, { headers });
    expect(models.status).toBe(200);
    expect(((await models.json()) as { data: unknown[] }).data.length).toBeGreaterThan(0);
  });

  it('reads itself with GET /v1/key', async () => {
    const response = await suite.call('GET', '/v1/key', { token: inferenceKey.fullKey });
    expect(response.status, response.text).toBe(200);
    expect(response.json).toMatchObject({ key_id: inferenceKey.keyId, name: 'inference only', scopes: ['inference'] });
  });

  it('reaches the services on the other inference routes (they answer for the object, not the scope)', async () => {
    // Nothing to find: the service's 404, past the gateway's and the service's scope checks.
    expectErrorBody(await suite.call('GET', '/v1/generations/gen_none', { token: inferenceKey.fullKey }), 404, 'generation_not_found');
    // The list takes inference too, and shows the key's own generations only.
    const listed = await suite.call('GET', '/v1/generations', { token: inferenceKey.fullKey });
    expect(listed.status, listed.text).toBe(200);
    for (const generation of listed.json.data) expect(generation.key_id).toBe(inferenceKey.keyId);
    expectErrorBody(
      await suite.call('POST', '/v1/feedback', { token: inferenceKey.fullKey, body: { generation_id: 'gen_none', rating: 1 } }),
      404,
      'generation_not_found',
    );
  });

  it('gets 403 insufficient_scope on every management route, naming the scope it needs', async () => {
    expect(routes.length).toBeGreaterThan(40);
    const seen = new Set<string>();
    for (const route of routes) {
      const path = route.template.replace('{workspace_id}', owner.workspaceId).replace(/\{[^}]+\}/g, 'x_test');
      const response = await suite.call(route.httpMethod, path, { token: inferenceKey.fullKey, body: route.body ? {} : undefined });
      const label = `${route.httpMethod} ${route.template}: ${response.text}`;
      if (route.credentials === 'user_session') {
        // docs/conventions.md#authentication: no key may, whatever its scopes.
        expectErrorBody(response, 403, 'user_session_required');
        continue;
      }
      expect(response.status, label).toBe(403);
      expect(response.json.error, label).toMatchObject({ code: 'insufficient_scope', field: null, metadata: { required_scope: route.scope } });
      seen.add(route.scope);
    }
    expect([...seen].sort()).toEqual(['manage', 'read']);
  });

  it('changes nothing when refused: it cannot make itself a key with more scopes, nor widen its own', async () => {
    const before = await suite.call('GET', '/v1/keys', { token: owner.token });
    const created = await suite.call('POST', '/v1/keys', { token: inferenceKey.fullKey, body: { name: 'escalated', scopes: ['inference', 'manage'] } });
    expectErrorBody(created, 403, 'insufficient_scope');
    const widened = await suite.call('PATCH', `/v1/keys/${inferenceKey.keyId}`, {
      token: inferenceKey.fullKey,
      body: { scopes: ['inference', 'read', 'manage'] },
    });
    expectErrorBody(widened, 403, 'insufficient_scope');
    const after = await suite.call('GET', '/v1/keys', { token: owner.token });
    expect(after.json.data.map((key: { key_id: string; scopes: string[] }) => [key.key_id, key.scopes])).toEqual(
      before.json.data.map((key: { key_id: string; scopes: string[] }) => [key.key_id, key.scopes]),
    );
  });

  it('carries the refusal in the gateway log as an audit line, with the key and never the full key', async () => {
    const response = await suite.call('GET', '/v1/keys', { token: inferenceKey.fullKey });
    const requestId = response.headers.get('x-request-id')!;
    // The child's log line reaches us through a pipe, possibly after the response.
    const line = await eventually(
      () =>
        suite.mesh
          .output('gateway')
          .split('\n')
          .find((l) => l.includes(requestId) && l.includes('"audit":true')),
      'the audit line in the gateway log',
    );
    // The line of its access.denied audit record (docs/api/audit.md).
    expect(JSON.parse(line)).toMatchObject({
      event: 'access.denied',
      outcome: 'denied',
      reason: 'insufficient_scope',
      key_id: inferenceKey.keyId,
      required_scope: 'read',
    });
    expect(suite.mesh.output('gateway')).not.toContain(inferenceKey.fullKey);
  });
});

describe('a key past its expires_at', () => {
  it('is refused with 401 api_key_expired by the gateway from then on', async () => {
    const expiresAt = new Date(Date.now() + 2_500);
    const created = await suite.call('POST', '/v1/keys', { token: owner.token, body: { name: 'short-lived', expires_at: expiresAt.toISOString() } });
    expect(created.status, created.text).toBe(201);
    const fullKey: string = created.json.full_key;
    expect((await suite.call('GET', '/v1/keys', { token: fullKey })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt.getTime() - Date.now())));
    // The gateway's cached answer does not outlive the expiry: the very next request is refused, by its clock.
    const response = await suite.call('GET', '/v1/keys', { token: fullKey });
    expectErrorBody(response, 401, 'api_key_expired');
    expect(response.headers.get('www-authenticate')).toBe('Bearer');
  });
});
