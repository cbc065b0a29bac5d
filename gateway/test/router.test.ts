import type { DescField } from '@bufbuild/protobuf';
import { UpdateConversationRequestSchema } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { ListKeysRequestSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { readRpcRules, rpcName } from '@switchboard/runtime/policy';
import { describe, expect, it } from 'vitest';
import { type Match, Router } from '../src/router.js';
import { parseTemplate, type Route, unversionedAlias } from '../src/routes.js';
import { meshServices } from '../src/services.js';
import { routeFor, router, routes } from './routes-fixture.js';

/** A match as plain data: the RPC, the canonical template and the path values by field name. */
function summary(match: Match) {
  if (!match) return undefined;
  if ('allowed' in match) return { allowed: [...match.allowed].sort() };
  const values: Record<string, string> = {};
  for (const [field, value] of match.pathValues) values[field.name] = value;
  return { rpc: match.route.method.name, template: match.route.template, values };
}

const at = (httpMethod: string, path: string, r: Router = router) => summary(r.match(httpMethod, path));

describe('buildRoutes', () => {
  it('finds a valid access rule on every RPC of every service; internal RPCs have no route', () => {
    const methods = meshServices().flatMap(({ service }) => service.methods);
    const rules = readRpcRules(methods);
    expect(rules.size).toBe(methods.length);
    const routed = new Set(routes.map((route) => rpcName(route.method)));
    for (const [name, rule] of rules) expect(routed.has(name), name).toBe(rule.kind !== 'internal' && routed.has(name));
    expect([...rules.values()].filter((rule) => rule.kind === 'internal').length).toBeGreaterThanOrEqual(8);
  });

  it('derives the routes from the google.api.http annotations', () => {
    expect(routes.length).toBeGreaterThan(60);
    for (const route of routes) {
      expect(route.template.startsWith('/v1/'), route.template).toBe(true);
      expect(route.method.methodKind).toBe('unary');
      if (route.httpMethod === 'GET' || route.httpMethod === 'DELETE') expect(route.body, route.template).toBe('');
    }
    const pairs = routes.map((r) => `${r.httpMethod} ${r.template}`);
    expect(new Set(pairs).size).toBe(pairs.length);
    expect(routeFor('POST', '/v1/auth/register')).toMatchObject({ owner: 'identity', successStatus: 201, credentials: 'none', body: '*' });
    expect(routeFor('POST', '/v1/account/2fa/enroll')).toMatchObject({ credentials: 'user_session', rule: { kind: 'account', userSession: true } });
    expect(routeFor('POST', '/v1/keys')).toMatchObject({ credentials: 'user_session_or_api_key', rule: { kind: 'workspace', action: 'keys.create' } });
    expect(routeFor('GET', '/v1/keys/{key_id}')).toMatchObject({ owner: 'keys', successStatus: 200, body: '' });
    expect(routeFor('DELETE', '/v1/conversations/{conversation_id}')).toMatchObject({ owner: 'conversations', successStatus: 204 });
    expect(routeFor('POST', '/v1/workspaces/{workspace_id}/webhooks').owner).toBe('webhooks');
    // Data-plane and internal RPCs have no REST route.
    for (const name of ['AuthorizeKey', 'AuthenticateKey', 'RecordUsage', 'RouteModel', 'PublishEvent', 'ResolveWorkspace']) {
      expect(
        routes.some((r) => r.method.name === name),
        name,
      ).toBe(false);
    }
  });
});

describe('parseTemplate', () => {
  it('splits literals and binds variables to request fields', () => {
    const segments = parseTemplate('/v1/keys/{key_id}/spend-cap', routeFor('PATCH', '/v1/keys/{key_id}/spend-cap').method.input);
    expect(segments.map((s) => ('literal' in s ? s.literal : `{${s.field.name}}`))).toEqual(['v1', 'keys', '{key_id}', 'spend-cap']);
    expect(
      parseTemplate('/v1/keys/{key_id=*}', routeFor('GET', '/v1/keys/{key_id}').method.input).map((s) => ('field' in s ? s.field.name : s.literal)),
    ).toEqual(['v1', 'keys', 'key_id']);
  });

  it('refuses templates it cannot serve', () => {
    const input = routeFor('GET', '/v1/keys/{key_id}').method.input;
    expect(() => parseTemplate('v1/keys/{key_id}', input)).toThrow(/start with \//);
    expect(() => parseTemplate('/v1/keys/{nope}', input)).toThrow(/nope/);
    expect(() => parseTemplate('/v1/keys/{key_id=**}', input)).toThrow();
    expect(() => parseTemplate('/v1/keys/x{key_id}', input)).toThrow();
    expect(() => parseTemplate('/v1/keys/*', input)).toThrow();
    // Variables must be top-level scalars.
    expect(() => parseTemplate('/v1/conversations/{metadata}', UpdateConversationRequestSchema)).toThrow(/metadata/);
  });
});

describe('unversionedAlias', () => {
  it('drops /v1 for every group but webhooks (docs/conventions.md#versions-and-paths)', () => {
    for (const [method, template] of [
      ['POST', '/v1/auth/login'],
      ['GET', '/v1/account'],
      ['GET', '/v1/organizations/{org_id}'],
      ['POST', '/v1/invitations/accept'],
      ['GET', '/v1/keys/{key_id}'],
      ['GET', '/v1/billing/balance'],
      ['GET', '/v1/conversations'],
      ['POST', '/v1/feedback'],
    ]) {
      const route = routeFor(method, template);
      expect(unversionedAlias(route), template).toEqual(route.segments.slice(1));
    }
    expect(unversionedAlias(routeFor('GET', '/v1/workspaces/{workspace_id}/webhooks'))).toBeUndefined();
    expect(unversionedAlias(routeFor('POST', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/test'))).toBeUndefined();
  });
});

describe('Router.match', () => {
  it('binds a variable segment', () => {
    expect(at('GET', '/v1/keys/key_abc')).toEqual({ rpc: 'GetKey', template: '/v1/keys/{key_id}', values: { key_id: 'key_abc' } });
    expect(at('PATCH', '/v1/keys/key_abc')).toMatchObject({ rpc: 'UpdateKey', values: { key_id: 'key_abc' } });
    expect(at('DELETE', '/v1/keys/key_abc')).toMatchObject({ rpc: 'RevokeKey', values: { key_id: 'key_abc' } });
    expect(at('GET', '/v1/keys')).toMatchObject({ rpc: 'ListKeys', values: {} });
    expect(at('POST', '/v1/keys')).toMatchObject({ rpc: 'CreateKey' });
  });

  it('prefers a literal sub-route to a shorter or variable one', () => {
    expect(at('PATCH', '/v1/keys/key_abc/spend-cap')).toMatchObject({ rpc: 'UpdateSpendCap', values: { key_id: 'key_abc' } });
    expect(at('PUT', '/v1/keys/key_abc/alert-webhook')).toMatchObject({ rpc: 'SetAlertWebhook' });
    expect(at('DELETE', '/v1/keys/key_abc/alert-webhook')).toMatchObject({ rpc: 'DeleteAlertWebhook' });
    expect(at('GET', '/v1/billing/usage')).toMatchObject({ rpc: 'GetUsage' });
    expect(at('GET', '/v1/billing/usage/by-tier')).toMatchObject({ rpc: 'GetUsageByTier' });
    expect(at('POST', '/v1/auth/login')).toMatchObject({ rpc: 'Login' });
    expect(at('POST', '/v1/auth/login/2fa')).toMatchObject({ rpc: 'LoginSecondFactor' });
    expect(at('GET', '/v1/feedback/summary')).toMatchObject({ rpc: 'GetFeedbackSummary' });
  });

  describe('with a literal sibling of /v1/keys/{key_id}', () => {
    // No proto has one today: add GET /v1/keys/usage (served by ListKeys) to the real routes.
    const listKeys = routeFor('GET', '/v1/keys');
    const sibling: Route = { ...listKeys, template: '/v1/keys/usage', segments: parseTemplate('/v1/keys/usage', ListKeysRequestSchema) };
    const withSibling = new Router([...routes, sibling]);

    it('the literal wins over the variable', () => {
      expect(at('GET', '/v1/keys/usage', withSibling)).toEqual({ rpc: 'ListKeys', template: '/v1/keys/usage', values: {} });
      expect(at('GET', '/keys/usage', withSibling)).toEqual({ rpc: 'ListKeys', template: '/v1/keys/usage', values: {} });
      expect(at('GET', '/v1/keys/key_1', withSibling)).toMatchObject({ rpc: 'GetKey', values: { key_id: 'key_1' } });
    });

    it('falls back to the variable when the literal branch has no match deeper down', () => {
      expect(at('PATCH', '/v1/keys/usage/spend-cap', withSibling)).toEqual({
        rpc: 'UpdateSpendCap',
        template: '/v1/keys/{key_id}/spend-cap',
        values: { key_id: 'usage' },
      });
    });
  });

  it('answers the unversioned alias with the same route, except for webhooks', () => {
    expect(at('GET', '/keys/key_abc')).toEqual({ rpc: 'GetKey', template: '/v1/keys/{key_id}', values: { key_id: 'key_abc' } });
    expect(at('PATCH', '/keys/key_abc/spend-cap')).toMatchObject({ rpc: 'UpdateSpendCap', values: { key_id: 'key_abc' } });
    expect(at('POST', '/auth/register')).toMatchObject({ rpc: 'Register' });
    expect(at('GET', '/account')).toMatchObject({ rpc: 'GetAccount' });
    expect(at('DELETE', '/organizations/org_1/members/usr_2')).toMatchObject({ rpc: 'RemoveMember', values: { org_id: 'org_1', user_id: 'usr_2' } });
    expect(at('POST', '/invitations/accept')).toMatchObject({ rpc: 'AcceptInvitation' });
    expect(at('GET', '/billing/usage/by-tier')).toMatchObject({ rpc: 'GetUsageByTier' });
    expect(at('GET', '/conversations/conv_1/messages')).toMatchObject({ rpc: 'ListMessages', values: { conversation_id: 'conv_1' } });
    expect(at('GET', '/feedback/summary')).toMatchObject({ rpc: 'GetFeedbackSummary' });

    expect(at('GET', '/v1/workspaces/org_1/webhooks')).toMatchObject({ rpc: 'ListWebhooks', values: { workspace_id: 'org_1' } });
    expect(at('GET', '/workspaces/org_1/webhooks')).toBeUndefined();
    expect(at('POST', '/workspaces/org_1/webhooks')).toBeUndefined();
    expect(at('GET', '/workspaces/org_1/webhooks/wh_1')).toBeUndefined();
  });

  it('binds several variables in order', () => {
    expect(at('POST', '/v1/workspaces/org_1/webhooks/wh_2/deliveries/dlv_3/redeliver')).toEqual({
      rpc: 'RedeliverDelivery',
      template: '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver',
      values: { workspace_id: 'org_1', webhook_id: 'wh_2', delivery_id: 'dlv_3' },
    });
  });

  it('answers 405 with the allowed methods when only the method is wrong', () => {
    expect(at('POST', '/v1/keys/key_abc')).toEqual({ allowed: ['DELETE', 'GET', 'PATCH'] });
    expect(at('PUT', '/keys/key_abc')).toEqual({ allowed: ['DELETE', 'GET', 'PATCH'] });
    expect(at('DELETE', '/v1/keys')).toEqual({ allowed: ['GET', 'POST'] });
    expect(at('GET', '/v1/auth/login')).toEqual({ allowed: ['POST'] });
    expect(at('HEAD', '/v1/account')).toEqual({ allowed: ['GET', 'PATCH'] });
  });

  it('ignores a trailing slash', () => {
    expect(at('GET', '/v1/keys/')).toMatchObject({ rpc: 'ListKeys' });
    expect(at('GET', '/v1/keys/key_abc/')).toMatchObject({ rpc: 'GetKey', values: { key_id: 'key_abc' } });
    expect(at('GET', '/keys/key_abc/')).toMatchObject({ rpc: 'GetKey', values: { key_id: 'key_abc' } });
    expect(at('GET', '/v1/account//')).toMatchObject({ rpc: 'GetAccount' });
  });

  it('percent-decodes variable segments', () => {
    expect(at('GET', '/v1/keys/a%2Fb')).toMatchObject({ rpc: 'GetKey', values: { key_id: 'a/b' } });
    expect(at('GET', '/v1/keys/key%20%C3%A9')).toMatchObject({ rpc: 'GetKey', values: { key_id: 'key é' } });
    expect(at('PATCH', '/v1/keys/a%2Fb/spend-cap')).toMatchObject({ rpc: 'UpdateSpendCap', values: { key_id: 'a/b' } });
    // An encoded slash never splits a segment.
    expect(at('GET', '/v1/conversations/a%2Fmessages')).toMatchObject({ rpc: 'GetConversation', values: { conversation_id: 'a/messages' } });
  });

  it('finds nothing for malformed escapes, empty segments or unknown paths', () => {
    expect(at('GET', '/v1/keys/%E0%A4%A')).toBeUndefined();
    expect(at('GET', '/v1/keys/%')).toBeUndefined();
    expect(at('PATCH', '/v1/keys//spend-cap')).toBeUndefined();
    for (const path of [
      '',
      '/',
      '/v1',
      '/v1/',
      '/v2/keys',
      '/v1/nope',
      '/nope',
      '/v1/keys/key_1/nope',
      '/v1/keys/a/b/c/d',
      '/v1/KEYS',
      '/keys/key_1/spend-cap/x',
    ]) {
      expect(at('GET', path), path).toBeUndefined();
    }
  });

  it('keeps each route’s own segments, so path values come from the right fields', () => {
    const match = router.match('DELETE', '/v1/organizations/org_1/invitations/inv_2');
    expect(match && 'route' in match).toBe(true);
    const { route, pathValues } = match as { route: Route; pathValues: Map<DescField, string> };
    expect(route.method.name).toBe('RevokeInvitation');
    for (const field of pathValues.keys()) expect(field.parent).toBe(route.method.input);
    expect(summary(match)).toMatchObject({ values: { org_id: 'org_1', invitation_id: 'inv_2' } });
  });

  it('refuses two routes for the same method and path', () => {
    const getKey = routeFor('GET', '/v1/keys/{key_id}');
    expect(() => new Router([getKey, { ...getKey }])).toThrow(/two routes/);
  });
});
