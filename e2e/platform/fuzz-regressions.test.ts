import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { deref } from '@switchboard/testkit/fuzz/arbitraries';
import { bootMesh, expectErrorBody, type RestCall, restClient, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * What the fuzzer (e2e/platform/fuzz.test.ts, issue 11) found, each with the minimal request it
 * shrank to: the answer it gives now, and, where the contract was the document, that the document
 * lists it.
 */

let mesh: Mesh;
let call: RestCall;
let user: SignedUp;
// biome-ignore lint/suspicious/noExplicitAny: the document is read as plain JSON.
let doc: any;

beforeAll(async () => {
  mesh = await bootMesh();
  call = restClient(mesh.gatewayUrl);
  user = await signUp(call);
  doc = (await call('GET', '/v1/openapi.json')).json;
});

afterAll(async () => {
  await mesh?.stop();
});

/** The error codes the document lists for an operation's status. */
const documentedCodes = (path: string, method: string, status: number) =>
  Object.keys(deref(doc, doc.paths[path][method].responses[String(status)]).content?.['application/json']?.examples ?? {});

async function newKey(): Promise<{ keyId: string; fullKey: string }> {
  const created = await call('POST', '/v1/keys', { token: user.token, body: { name: 'fuzz regression' } });
  expect(created.status, created.text).toBe(201);
  return { keyId: created.json.key.key_id, fullKey: created.json.full_key };
}

describe('fuzz findings', () => {
  it('changes a webhook URL and re-enables it in one PATCH (was a 500: the failure clock was set twice in one UPDATE)', async () => {
    const hooks = `/v1/workspaces/${user.workspaceId}/webhooks`;
    const created = await call('POST', hooks, { token: user.token, body: { url: 'https://127.0.0.1:9/fuzz', events: [] } });
    expect(created.status, created.text).toBe(201);
    const updated = await call('PATCH', `${hooks}/${created.json.webhook_id}`, { token: user.token, body: { url: 'https://127.0.0.1:0/fuzz', enabled: true } });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.json).toMatchObject({ url: 'https://127.0.0.1:0/fuzz', enabled: true, failing_since: null });
  });

  it('names the Bearer scheme on every 401, the sign-in calls too (RFC 9110, docs/conventions.md)', async () => {
    const login = await call('POST', '/v1/auth/login', { body: { email: 'AAAAAAAAAAAAAAAAAAAAAA', password: '123' } });
    expectErrorBody(login, 401, 'invalid_credentials');
    expect(login.headers.get('www-authenticate')).toBe('Bearer');
    const refresh = await call('POST', '/v1/auth/refresh', { body: { refresh_token: '\u0001' } });
    expectErrorBody(refresh, 401, 'invalid_token', 'refresh_token');
    expect(refresh.headers.get('www-authenticate')).toBe('Bearer');
  });

  it('documents the refusals of an API key on a route for user sessions, which checks the key first', async () => {
    const unknown = await call('POST', '/v1/account/2fa/enroll', { token: 'sb_AAAAAAAAAAAAAAAAAAAAAA', body: { password: 'fuzz passphrase' } });
    expectErrorBody(unknown, 401, 'invalid_api_key');
    const revoked = await newKey();
    expect((await call('DELETE', `/v1/keys/${revoked.keyId}`, { token: user.token })).status).toBe(200);
    const logout = await call('POST', '/v1/auth/logout', { token: revoked.fullKey, body: {} });
    expectErrorBody(logout, 401, 'api_key_revoked');
    for (const [path, method] of [
      ['/v1/account/2fa/enroll', 'post'],
      ['/v1/auth/logout', 'post'],
    ]) {
      expect(documentedCodes(path, method, 401), path).toEqual(expect.arrayContaining(['invalid_api_key', 'api_key_revoked']));
      expect(documentedCodes(path, method, 402), path).toEqual(['spend_cap_exceeded']);
    }
  });

  it('documents the 403 workspace_mismatch of an API key naming another workspace on a route with the workspace in its path', async () => {
    const key = await newKey();
    const hooks = `/v1/workspaces/${user.workspaceId}/webhooks`;
    const created = await call('POST', hooks, { token: user.token, body: { url: 'https://127.0.0.1:9/fuzz', events: [] } });
    const patched = await call('PATCH', `${hooks}/${created.json.webhook_id}`, { token: key.fullKey, headers: { 'x-workspace-id': user.userId }, body: {} });
    expectErrorBody(patched, 403, 'workspace_mismatch');
    expect(documentedCodes('/v1/workspaces/{workspace_id}/webhooks/{webhook_id}', 'patch', 403)).toContain('workspace_mismatch');
  });
});
