import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { create, type DescMessage, type DescMethodUnary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { Client } from '@connectrpc/connect';
import type { ServiceName } from '@switchboard/contracts/components';
import type { AuthService, OrganizationService } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { AuthenticateKeyResponseSchema, type KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import type { UnaryClient } from '@switchboard/runtime/clients';
import { createLogger } from '@switchboard/runtime/log';
import { type MeshClaims, MeshTokens } from '@switchboard/runtime/mesh-token';
import { Metrics } from '@switchboard/runtime/metrics';
import { keyScopes } from '@switchboard/runtime/policy';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Authenticator } from '../src/auth.js';
import { createRestHandler } from '../src/rest.js';
import { Router } from '../src/router.js';
import { buildRoutes, type Route } from '../src/routes.js';

/**
 * An API key's scopes and expiry at the gateway (docs/api/keys.md#scopes, #expiry), in process: the
 * REST handler with the real Authenticator, whose keys and identity services are stand-ins, and
 * services that record what reaches them. A refused call never reaches a service.
 */

const workspaceId = 'org_scopes';
const meshTokens = new MeshTokens('a-mesh-secret-of-at-least-32-bytes-for-tests');

/** What the stand-in keys service answers for each full key. */
const keyAnswers = new Map<string, { scopes: string[]; expiresAt?: number }>();
let keyCalls = 0;
const keys = {
  async authenticateKey({ fullKey }: { fullKey: string }) {
    keyCalls += 1;
    const answer = keyAnswers.get(fullKey);
    if (!answer) return create(AuthenticateKeyResponseSchema, { reason: 'unknown' });
    return create(AuthenticateKeyResponseSchema, {
      keyId: `key_${fullKey.slice(3, 10)}`,
      workspaceId,
      createdBy: 'usr_creator',
      status: 'active',
      scopes: answer.scopes,
      expiresAt: answer.expiresAt === undefined ? undefined : timestampFromMs(answer.expiresAt),
    });
  },
} as unknown as Client<typeof KeyService>;
const organizations = {
  async resolveWorkspace({ workspaceId: requested }: { workspaceId: string }) {
    return { workspaceId: requested || workspaceId, role: 'owner', deactivated: false };
  },
} as unknown as Client<typeof OrganizationService>;

/** Every call that reached a service: the RPC and the mesh token's claims. */
const reached: Array<{ rpc: string; claims: MeshClaims }> = [];
const service = {
  async call(method: DescMethodUnary<DescMessage, DescMessage>, _input: unknown, header: Record<string, string>) {
    const owner = routes.find((route) => route.method === method)!.owner;
    reached.push({ rpc: method.name, claims: await meshTokens.verify(header.authorization.slice('Bearer '.length), owner) });
    return { message: create(method.output), header: {} };
  },
} as unknown as UnaryClient;

const routes = buildRoutes();
let server: http.Server;
let baseUrl: string;

beforeAll(async () => {
  const log = createLogger('gateway-test', 'silent');
  const authenticator = new Authenticator({} as Client<typeof AuthService>, organizations, keys, log);
  const clients = new Proxy({}, { get: () => service }) as Record<ServiceName, UnaryClient>;
  const handler = createRestHandler({
    router: new Router(routes),
    authenticator,
    clients,
    meshTokens,
    log,
    metrics: new Metrics('gateway-test'),
    builtIn: async () => false,
  });
  server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

beforeEach(() => {
  reached.length = 0;
});

let keyCounter = 0;
/** A full key the stand-in keys service knows, with these scopes. */
function keyWith(scopes: string[], expiresAt?: number): string {
  keyCounter += 1;
  const fullKey = `sb_${String(keyCounter).padStart(49, '0')}`;
  keyAnswers.set(fullKey, { scopes, expiresAt });
  return fullKey;
}

/** A request to `route` with `token`: its path with placeholder ids (the key's workspace where the path names one), `{}` as the body. */
async function callRoute(route: Route, token: string, init: { headers?: Record<string, string>; rawBody?: string } = {}) {
  const path = route.template.replace('{workspace_id}', workspaceId).replace(/\{[^}]+\}/g, 'x_test');
  const hasBody = route.body !== '';
  const response = await fetch(`${baseUrl}${path}`, {
    method: route.httpMethod,
    headers: { authorization: `Bearer ${token}`, ...(hasBody ? { 'content-type': 'application/json' } : {}), ...init.headers },
    body: hasBody ? (init.rawBody ?? '{}') : undefined,
  });
  const text = await response.text();
  return { status: response.status, text, json: text ? JSON.parse(text) : undefined };
}

const keyRoutes = routes.filter((route) => route.credentials === 'user_session_or_api_key');
const label = (route: Route) => `${route.httpMethod} ${route.template}`;

describe("an API key's scopes at the gateway", () => {
  it('refuses every route outside the scopes with 403 insufficient_scope naming the one it needs, before any service call', async () => {
    expect(keyRoutes.length).toBeGreaterThan(30);
    for (const route of keyRoutes) {
      const others = keyScopes.filter((scope) => !route.acceptedScopes.includes(scope));
      const response = await callRoute(route, keyWith(others));
      expect(response.status, `${label(route)}: ${response.text}`).toBe(403);
      expect(response.json.error, label(route)).toMatchObject({ code: 'insufficient_scope', field: null, metadata: { required_scope: route.scope } });
    }
    expect(reached).toEqual([]);
  });

  it('lets a key with the scope through, its scopes in the mesh token for the service to check again', async () => {
    for (const route of keyRoutes) {
      const response = await callRoute(route, keyWith([route.scope]));
      expect(response.status, `${label(route)}: ${response.text}`).toBe(route.successStatus);
      expect(reached.at(-1)).toEqual({
        rpc: route.method.name,
        claims: expect.objectContaining({ principalType: 'key', scopes: [route.scope], workspaceId, role: 'owner' }),
      });
    }
  });

  it("derives each route's scope from its access rule, else its method (docs/api/keys.md#scopes)", () => {
    const scopeOf = (method: string, template: string) => routes.find((route) => route.httpMethod === method && route.template === template)?.scope;
    expect(scopeOf('GET', '/v1/key')).toBe('inference');
    expect(scopeOf('GET', '/v1/generations/{generation_id}')).toBe('inference');
    expect(scopeOf('POST', '/v1/feedback')).toBe('inference');
    expect(scopeOf('GET', '/v1/generations')).toBe('read');
    expect(scopeOf('GET', '/v1/keys')).toBe('read');
    // The generation routes also admit the other of inference and read (a key's own, the workspace's).
    const acceptedOf = (method: string, template: string) => routes.find((route) => route.httpMethod === method && route.template === template)?.acceptedScopes;
    expect(acceptedOf('GET', '/v1/generations/{generation_id}')).toEqual(['inference', 'read']);
    expect(acceptedOf('GET', '/v1/generations')).toEqual(['read', 'inference']);
    for (const route of keyRoutes) if (!route.template.startsWith('/v1/generations')) expect(route.acceptedScopes, label(route)).toEqual([route.scope]);
    expect(scopeOf('POST', '/v1/keys')).toBe('manage');
    expect(scopeOf('PUT', '/v1/billing/spend-limits')).toBe('manage');
    for (const route of keyRoutes) if (route.scope !== 'inference') expect(route.scope, label(route)).toBe(route.httpMethod === 'GET' ? 'read' : 'manage');
  });

  it('checks the scope after the credential and its kind, before the workspace and the body', async () => {
    const createKey = keyRoutes.find((route) => label(route) === 'POST /v1/keys')!;
    const inferenceOnly = keyWith(['inference']);
    // Another workspace named: the scope answers first (both are 403s of the credential).
    const elsewhere = await callRoute(createKey, inferenceOnly, { headers: { 'x-workspace-id': 'org_other' } });
    expect(elsewhere.json.error).toMatchObject({ code: 'insufficient_scope' });
    // A malformed body: the scope answers first, as for every refusal of the credential.
    const malformed = await callRoute(createKey, inferenceOnly, { rawBody: '{"name": ' });
    expect(malformed.json.error).toMatchObject({ code: 'insufficient_scope' });
    // A route for user sessions only: user_session_required, whatever the key's scopes.
    const sessionOnly = routes.find((route) => route.credentials === 'user_session')!;
    const refused = await callRoute(sessionOnly, keyWith([sessionOnly.scope]));
    expect(refused.json.error, label(sessionOnly)).toMatchObject({ code: 'user_session_required' });
    expect(reached).toEqual([]);
  });

  it('fails closed: scopes this build does not know grant nothing', async () => {
    const getKey = keyRoutes.find((route) => label(route) === 'GET /v1/keys/{key_id}')!;
    const response = await callRoute(getKey, keyWith(['admin', 'READ']));
    expect(response.json.error).toMatchObject({ code: 'insufficient_scope', metadata: { required_scope: 'read' } });
  });
});

describe("an API key's expiry at the gateway", () => {
  it('answers 401 api_key_expired from its expires_at on, even while the answer is cached', async () => {
    const listKeys = keyRoutes.find((route) => label(route) === 'GET /v1/keys')!;
    const fullKey = keyWith([...keyScopes], Date.now() + 300);
    const before = keyCalls;
    expect((await callRoute(listKeys, fullKey)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 350));
    const expired = await callRoute(listKeys, fullKey);
    expect(expired.status, expired.text).toBe(401);
    expect(expired.json.error).toMatchObject({ code: 'api_key_expired' });
    // The keys service was asked once: the second answer came from the cache (1 s), refused by the clock.
    expect(keyCalls - before).toBe(1);
  });

  it('accepts a key whose expires_at is ahead, or that has none', async () => {
    const listKeys = keyRoutes.find((route) => label(route) === 'GET /v1/keys')!;
    expect((await callRoute(listKeys, keyWith([...keyScopes], Date.now() + 60_000))).status).toBe(200);
    expect((await callRoute(listKeys, keyWith([...keyScopes]))).status).toBe(200);
  });
});
