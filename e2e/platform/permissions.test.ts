import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { buildRoutes } from '@switchboard/gateway/routes';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { Mailbox } from '@switchboard/testkit/mailbox';
import { bootMesh, restClient } from '@switchboard/testkit/mesh';
import {
  accountScopedServices,
  type Caller,
  principals,
  publicServices,
  type RouteCase,
  routeCases,
  scopeOfRow,
  type Workspace,
  World,
  walkedScopes,
} from '@switchboard/testkit/permissions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Walks the permission table (testkit/src/permissions.ts) through REST: every route, with a principal of
 * each role in the workspace and one of another workspace, for rows of "own" rules the
 * developer on its own object, and the owner's API keys of one scope each (docs/api/keys.md#scopes).
 */

let mesh: Mesh;
let call: ReturnType<typeof restClient>;
let world: World;
let shared: Workspace;

beforeAll(async () => {
  // Debug level: authorization decisions are logged there.
  mesh = await bootMesh({ LOG_LEVEL: 'debug' });
  call = restClient(mesh.gatewayUrl);
  world = new World(call, new Mailbox(mesh.env.MAILBOX_DIR), meshClient(UsageService, mesh.urls.billing, 'billing', { caller: 'data-plane' }));
  shared = await world.workspace();
});

afterAll(async () => {
  await mesh?.stop();
});

/** The routes the gateway serves, by `METHOD template`. */
const routes = new Map(buildRoutes().map((route) => [`${route.httpMethod} ${route.template}`, route]));
const routeOf = (routeCase: RouteCase) => routes.get(`${routeCase.method} ${routeCase.template}`)!;

/** The callers of a row: every principal, and the developer on its own object where the row expects it. */
const callersOf = (routeCase: RouteCase): Caller[] => (routeCase.expect.developerOnOwn === undefined ? principals : [...principals, 'developerOnOwn']);

/** The object a call changes, read as the owner (undefined for rows without a subject). */
async function readSubject(routeCase: RouteCase, ws: Workspace, as: Caller) {
  if (!routeCase.subject) return undefined;
  const read = await world.callAs(ws, 'owner', 'GET', routeCase.subject(ws, as));
  expect(read.status, read.text).toBe(200);
  return read.json;
}

/**
 * A row called with the owner's key that has `scope` only: a route for user sessions refuses every
 * key; a key without the route's scope gets 403 `insufficient_scope` naming it and changes nothing;
 * a key with it gets what the owner gets (or the row's `asKey`).
 */
async function walkKey(routeCase: RouteCase, scope: (typeof walkedScopes)[number]) {
  const required = scopeOfRow(routeCase);
  const context = (text: string) => `the ${scope} key: ${text}`;
  const call = (ws: Workspace) => world.callAsKey(ws, scope, routeCase.method, routeCase.path(ws, 'owner'), routeCase.body?.(ws, 'owner'));
  if (routeOf(routeCase).credentials === 'user_session') {
    const response = await call(shared);
    expect(response.status, context(response.text)).toBe(403);
    expect(response.json.error.code, context(response.text)).toBe('user_session_required');
    return;
  }
  const allowed = scope === required || (routeCase.alsoScopes ?? []).includes(scope);
  const ws = allowed && routeCase.mutates ? await world.workspace() : shared;
  const before = await readSubject(routeCase, ws, 'owner');
  const response = await call(ws);
  const outcome = allowed
    ? (routeCase.asKey ?? { status: routeCase.expect.owner })
    : { status: 403, code: 'insufficient_scope', metadata: { required_scope: required } };
  expect(response.status, context(response.text)).toBe(outcome.status);
  if ('code' in outcome && outcome.code) expect(response.json.error, context(response.text)).toMatchObject({ code: outcome.code });
  if ('metadata' in outcome && outcome.metadata) expect(response.json.error.metadata, context(response.text)).toEqual(outcome.metadata);
  if (response.status === 404) expect(response.json.error.code, context(response.text)).toBe(routeCase.notFoundCode ?? 'organization_not_found');
  if (!routeCase.showsFullKey || response.status >= 300) expect(response.text, context(response.text)).not.toMatch(/full_key|sb_[0-9A-Za-z]{49}/);
  if (response.status >= 400 && before !== undefined)
    expect(await readSubject(routeCase, ws, 'owner'), context('the refused call changed its object')).toEqual(before);
  if (!allowed) return;
  // It acts as the owner: the row's checks hold as for the owner, unless the row says otherwise.
  if (routeCase.asKey?.check) await routeCase.asKey.check(response, ws, world);
  else if (!routeCase.asKey || response.status < 400) await routeCase.check?.(response, ws, 'owner', world);
}

describe('the permission table, route by route', () => {
  for (const routeCase of routeCases) {
    it(`${routeCase.method} ${routeCase.template} (${routeCase.rpc})`, async () => {
      for (const as of callersOf(routeCase)) {
        const ws = routeCase.mutates ? await world.workspace() : shared;
        const before = await readSubject(routeCase, ws, as);
        const response = await world.callAs(ws, as, routeCase.method, routeCase.path(ws, as), routeCase.body?.(ws, as));
        const context = `${as}: ${response.text}`;
        expect(response.status, context).toBe(routeCase.expect[as]);
        if (response.status === 403) expect(response.json.error.code, context).toMatch(/^forbidden$|^invitation_email_mismatch$/);
        if (response.status === 404) {
          // Another tenant's organization or object: never 403, never a trace of the object.
          expect(response.json.error.code, context).toBe(routeCase.notFoundCode ?? 'organization_not_found');
          expect(response.text).not.toContain(ws.name);
        }
        // A full key is shown once, in the answer that creates it (docs/api/keys.md#the-full-key).
        if (!routeCase.showsFullKey) expect(response.text, context).not.toMatch(/full_key|sb_[0-9A-Za-z]{49}/);
        if (response.status >= 400 && before !== undefined) {
          expect(await readSubject(routeCase, ws, as), `${as}: the refused call changed its object`).toEqual(before);
        }
        await routeCase.check?.(response, ws, as, world);
      }
      for (const scope of walkedScopes) await walkKey(routeCase, scope);
    });
  }

  it("states each row's scope as the gateway derives it", () => {
    for (const routeCase of routeCases) {
      expect(routeOf(routeCase).scope, `${routeCase.method} ${routeCase.template}`).toBe(scopeOfRow(routeCase));
      expect(routeOf(routeCase).acceptedScopes, `${routeCase.method} ${routeCase.template}`).toEqual([scopeOfRow(routeCase), ...(routeCase.alsoScopes ?? [])]);
    }
  });

  it('logs each decision at debug level', async () => {
    const response = await call('DELETE', `/v1/organizations/${shared.orgId}`, { token: shared.users.developer.token });
    expect(response.status).toBe(403);
    const requestId = response.headers.get('x-request-id')!;
    // The child's log line reaches us through a pipe, possibly after the response.
    const line = await eventually(
      () =>
        mesh
          .output('identity')
          .split('\n')
          .find((l) => l.includes(requestId) && l.includes('authorization decision')),
      'the decision in the identity log',
    );
    expect(JSON.parse(line)).toMatchObject({
      level: 20,
      action: 'organization.delete',
      principal_id: shared.users.developer.userId,
      workspace_id: shared.orgId,
      role: 'developer',
      decision: 'deny',
    });
  });

  it('carries the request id into the calls that authenticate the caller and resolve its workspace', async () => {
    const rpcLine = (component: 'identity' | 'keys', requestId: string, rpc: string) =>
      eventually(
        () =>
          mesh
            .output(component)
            .split('\n')
            .find((l) => l.includes(requestId) && l.includes(rpc)),
        `the ${rpc} call of ${requestId} in the ${component} log`,
      );
    // A non-member's answer is never cached: the gateway asks identity each time.
    const resolving = await call('GET', `/v1/organizations/${shared.orgId}/members`, { token: shared.users.outsider.token });
    expect(resolving.status).toBe(404);
    expect(JSON.parse(await rpcLine('identity', resolving.headers.get('x-request-id')!, 'ResolveWorkspace'))).toMatchObject({ msg: 'rpc' });
    const unknownKey = `sb_${'Q'.repeat(49)}`;
    const authenticating = await call('GET', '/v1/keys', { token: unknownKey });
    expect(authenticating.status).toBe(401);
    expect(JSON.parse(await rpcLine('keys', authenticating.headers.get('x-request-id')!, 'AuthenticateKey'))).toMatchObject({ msg: 'rpc' });
  });

  it('answers 404 to a non-member naming the organization in X-Workspace-Id too', async () => {
    const outsider = shared.users.outsider;
    const response = await call('GET', `/v1/organizations/${shared.orgId}/members`, {
      token: outsider.token,
      headers: { 'x-workspace-id': shared.orgId },
    });
    expect(response.status).toBe(404);
    expect(response.text).not.toContain(shared.name);
    // Indistinguishable from an organization that does not exist.
    const missing = await call('GET', '/v1/organizations/org_doesnotexist/members', { token: outsider.token });
    const existing = await call('GET', `/v1/organizations/${shared.orgId}/members`, { token: outsider.token });
    expect(missing.status).toBe(404);
    expect({ ...existing.json.error, request_id: null }).toEqual({ ...missing.json.error, request_id: null });
  });

  it('is enforced by the service before its handler', async () => {
    // billing.topup (owners and admins only): the developer's call is refused before the handler,
    // so it starts nothing, not even under its idempotency key: the admin's call with that key and
    // another amount is a new top-up, not 422 idempotency_key_reused. (Operations not built yet
    // pass their rule before answering Unimplemented: the services' own tests show it.)
    const { developer, admin, owner } = shared.users;
    const idempotencyKey = `enforced-${Date.now().toString(36)}`;
    const asDeveloper = await call('POST', '/v1/billing/topup', {
      token: developer.token,
      headers: { 'x-workspace-id': shared.orgId },
      body: { amount_usd: '5', idempotency_key: idempotencyKey },
    });
    expect(asDeveloper.status, asDeveloper.text).toBe(403);
    expect(asDeveloper.json.error.code).toBe('forbidden');
    const asAdmin = await call('POST', '/v1/billing/topup', {
      token: admin.token,
      headers: { 'x-workspace-id': shared.orgId },
      body: { amount_usd: '6', idempotency_key: idempotencyKey },
    });
    expect(asAdmin.status, asAdmin.text).toBe(201);
    expect(asAdmin.json).toMatchObject({ amount_usd: '6', idempotency_key: idempotencyKey, status: 'pending' });
    const listed = await call('GET', '/v1/billing/topups?limit=100', { token: owner.token, headers: { 'x-workspace-id': shared.orgId } });
    const withKey = listed.json.data.filter((topup: { idempotency_key: string }) => topup.idempotency_key === idempotencyKey);
    expect(withKey.map((topup: { checkout_id: string }) => topup.checkout_id)).toEqual([asAdmin.json.checkout_id]);
  });

  it('has a row for every built route of the contract, and every row names a route', async () => {
    const routes = buildRoutes().filter((route) => ![...accountScopedServices, ...publicServices].includes(route.method.parent.typeName));
    const inTable = new Set(routeCases.map((c) => `${c.method} ${c.template}`));
    const known = new Set(routes.map((route) => `${route.httpMethod} ${route.template}`));
    for (const key of inTable) expect(known, `the table names ${key}, which is no route`).toContain(key);
    // A route without a row must not be built yet (501): building it means adding its row.
    const owner = shared.users.owner;
    for (const route of routes) {
      const key = `${route.httpMethod} ${route.template}`;
      if (inTable.has(key)) continue;
      const path = route.template.replace(/\{[^}]+\}/g, 'x_test');
      const response = await call(route.httpMethod, path, {
        token: owner.token,
        headers: { 'x-workspace-id': shared.orgId },
        body: route.body ? {} : undefined,
      });
      expect(response.status, `${key} has no row in testkit/src/permissions.ts but answers ${response.status}: ${response.text}`).toBe(501);
    }
    // The public routes (no row: the capability is the token in the path or the provider's
    // signature) answer without credentials, and a bogus capability gets nothing: 400 or 404,
    // or 501 while not built.
    const publicRoutes = buildRoutes().filter((route) => publicServices.includes(route.method.parent.typeName));
    expect(publicRoutes.length).toBeGreaterThan(0);
    for (const route of publicRoutes) {
      const key = `${route.httpMethod} ${route.template}`;
      expect(inTable, `${key} is public: it has no row`).not.toContain(key);
      const response = await world.anonymous(route.httpMethod, route.template.replace(/\{[^}]+\}/g, 'x_test'), route.body ? {} : undefined);
      expect([400, 404, 501], `${key} without credentials, with a bogus capability: ${response.status} ${response.text}`).toContain(response.status);
    }
  });
});
