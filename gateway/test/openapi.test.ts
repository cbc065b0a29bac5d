import http from 'node:http';
import type { AddressInfo } from 'node:net';
import SwaggerParser from '@apidevtools/swagger-parser';
import { webhookEventCatalog } from '@switchboard/contracts/webhook-events';
import { errorCatalogue } from '@switchboard/runtime/error-catalogue';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handleDocs } from '../src/docs.js';
import { buildOpenApiDocument } from '../src/openapi.js';
import { buildRoutes } from '../src/routes.js';
import { inlineShared, type Json } from './openapi-fixture.js';

/** Every REST route of docs/api/ and docs/webhooks.md (paths as the docs write them; variable names may differ). */
const specRoutes: Array<[string, string]> = [
  // account (docs/api/identity.md#account-endpoints)
  ['POST', '/v1/auth/register'],
  ['POST', '/v1/auth/login'],
  ['POST', '/v1/auth/login/2fa'],
  ['POST', '/v1/auth/refresh'],
  ['POST', '/v1/auth/logout'],
  ['POST', '/v1/auth/password-reset'],
  ['POST', '/v1/auth/password-reset/confirm'],
  ['POST', '/v1/auth/verify-email'],
  ['GET', '/v1/.well-known/jwks.json'],
  ['GET', '/v1/account'],
  ['PATCH', '/v1/account'],
  ['POST', '/v1/account/password'],
  ['GET', '/v1/account/2fa'],
  ['POST', '/v1/account/2fa/enroll'],
  ['POST', '/v1/account/2fa/activate'],
  ['POST', '/v1/account/2fa/disable'],
  ['POST', '/v1/account/2fa/recovery-codes'],
  ['POST', '/v1/account/deactivate'],
  ['GET', '/v1/account/sessions'],
  ['DELETE', '/v1/account/sessions/{session_id}'],
  // organizations (docs/api/identity.md#organization-endpoints)
  ['POST', '/v1/organizations'],
  ['GET', '/v1/organizations'],
  ['GET', '/v1/organizations/{org_id}'],
  ['POST', '/v1/organizations/{org_id}/invitations'],
  ['POST', '/v1/invitations/accept'],
  ['GET', '/v1/organizations/{org_id}/members'],
  ['PATCH', '/v1/organizations/{org_id}/members/{user_id}'],
  ['DELETE', '/v1/organizations/{org_id}/members/{user_id}'],
  ['POST', '/v1/organizations/{org_id}/transfer-ownership'],
  ['DELETE', '/v1/organizations/{org_id}'],
  ['GET', '/v1/organizations/{org_id}/invitations'],
  ['DELETE', '/v1/organizations/{org_id}/invitations/{invitation_id}'],
  // keys (docs/api/keys.md#endpoints)
  ['POST', '/v1/keys'],
  ['GET', '/v1/keys'],
  ['GET', '/v1/keys/{key_id}'],
  ['PATCH', '/v1/keys/{key_id}'],
  ['PATCH', '/v1/keys/{key_id}/spend-cap'],
  ['PUT', '/v1/keys/{key_id}/alert-webhook'],
  ['DELETE', '/v1/keys/{key_id}/alert-webhook'],
  ['PUT', '/v1/keys/{key_id}/routing-policy'],
  ['DELETE', '/v1/keys/{key_id}'],
  // keys II (docs/api/keys.md#periodic-budgets, #rotation, #introspection, #workspace-budgets)
  ['PUT', '/v1/keys/{key_id}/spend-limits'],
  ['POST', '/v1/keys/{key_id}/rotate'],
  ['GET', '/v1/key'],
  ['GET', '/v1/billing/spend-limits'],
  ['PUT', '/v1/billing/spend-limits'],
  // billing (docs/api/billing.md#endpoints)
  ['GET', '/v1/billing/balance'],
  ['GET', '/v1/billing/usage'],
  ['GET', '/v1/billing/usage/by-tier'],
  ['GET', '/v1/billing/plan'],
  ['GET', '/v1/billing/upgrade-hint'],
  ['POST', '/v1/billing/checkout'],
  ['POST', '/v1/billing/topup'],
  ['GET', '/v1/billing/topups'],
  ['POST', '/v1/billing/providers/stripe/webhook'],
  ['GET', '/v1/billing/sandbox/checkout/{token}'],
  ['POST', '/v1/billing/sandbox/checkout/{token}/complete'],
  // conversations and feedback (docs/api/conversations.md#endpoints)
  ['POST', '/v1/conversations'],
  ['GET', '/v1/conversations'],
  ['GET', '/v1/conversations/{id}'],
  ['PATCH', '/v1/conversations/{id}'],
  ['DELETE', '/v1/conversations/{id}'],
  ['POST', '/v1/conversations/{id}/messages'],
  ['GET', '/v1/conversations/{id}/messages'],
  ['POST', '/v1/feedback'],
  ['GET', '/v1/feedback/summary'],
  // webhooks (docs/webhooks.md#endpoints)
  ['POST', '/v1/workspaces/{workspace_id}/webhooks'],
  ['GET', '/v1/workspaces/{workspace_id}/webhooks'],
  ['GET', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}'],
  ['PATCH', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}'],
  ['DELETE', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}'],
  ['POST', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/test'],
  ['GET', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries'],
  ['POST', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/rotate-secret'],
  ['POST', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver'],
  ['POST', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/recover'],
  ['GET', '/v1/webhook-event-types'],
];

/** /v1/conversations/{id} and /v1/conversations/{conversation_id} are the same route. */
const shape = (template: string) => template.replace(/\{[^}]+\}/g, '{}');

const methods = ['get', 'put', 'post', 'patch', 'delete'] as const;

/** The operations of the REST surface (the protos' routes); `frontDoor` for the data plane's OpenAI-compatible ones. */
function operations(doc: Json, frontDoor = false): Array<{ method: string; path: string; op: Json }> {
  return Object.entries(doc.paths as Record<string, Json>)
    .flatMap(([path, item]) => methods.filter((m) => item[m]).map((m) => ({ method: m.toUpperCase(), path, op: item[m] as Json })))
    .filter(({ op }) => (op['x-switchboard-component'] === 'data-plane') === frontDoor);
}

function find(doc: Json, method: string, specPath: string): Json | undefined {
  return operations(doc).find((o) => o.method === method && shape(o.path) === shape(specPath))?.op;
}

/** Follows a local $ref. */
function deref(doc: Json, node: Json): Json {
  let current = node;
  while (current && typeof current.$ref === 'string') {
    current = current.$ref
      .replace(/^#\//, '')
      .split('/')
      .map((p: string) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce((acc: Json, key: string) => acc[key], doc);
  }
  return current;
}

/** Every $ref reachable from a schema (through properties, items, anyOf...). */
function refsOf(doc: Json, schema: unknown, seen = new Set<string>()): Set<string> {
  if (!schema || typeof schema !== 'object') return seen;
  if (Array.isArray(schema)) {
    for (const s of schema) refsOf(doc, s, seen);
    return seen;
  }
  const node = schema as Json;
  if (typeof node.$ref === 'string') {
    if (seen.has(node.$ref)) return seen;
    seen.add(node.$ref);
    refsOf(doc, deref(doc, node), seen);
  }
  for (const [key, value] of Object.entries(node)) if (key !== '$ref') refsOf(doc, value, seen);
  return seen;
}

describe('OpenAPI document', () => {
  const routes = buildRoutes();
  const shared = buildOpenApiDocument(routes, { version: '1.2.3' }) as Json;
  const doc = inlineShared(shared);

  it('is a valid OpenAPI 3.1 document', async () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.title).toBe('Switchboard API');
    expect(doc.info.version).toBe('1.2.3');
    const validated = (await SwaggerParser.validate(structuredClone(shared) as unknown as Parameters<typeof SwaggerParser.validate>[0])) as Json;
    expect(validated.openapi).toBe('3.1.0');
  });

  it('is deterministic', () => {
    expect(JSON.stringify(buildOpenApiDocument(buildRoutes(), { version: '1.2.3' }))).toBe(JSON.stringify(shared));
  });

  it('lists every route of docs/api/ and docs/webhooks.md with its method', () => {
    const missing = specRoutes.filter(([method, path]) => !find(doc, method, path)).map(([m, p]) => `${m} ${p}`);
    expect(missing).toEqual([]);
  });

  it('lists exactly the canonical /v1 routes', () => {
    const listed = operations(doc).map((o) => `${o.method} ${o.path}`);
    expect(listed.sort()).toEqual(routes.map((r) => `${r.httpMethod} ${r.template}`).sort());
    for (const path of Object.keys(doc.paths)) expect(path.startsWith('/v1/')).toBe(true);
    expect(operations(doc, true).map((o) => `${o.method} ${o.path}`)).toEqual(['POST /v1/chat/completions', 'GET /v1/models']);
    expect(doc.info.description).toMatch(/without the `\/v1` prefix/);
  });

  it('documents registration: 201 with the account and the session', () => {
    const op = find(doc, 'POST', '/v1/auth/register')!;
    expect(op.operationId).toBe('AuthService_Register');
    expect(op.security).toEqual([]);
    expect(op.summary).toBeTruthy();
    expect(op.responses['200']).toBeUndefined();
    const schema = op.responses['201'].content['application/json'].schema;
    const body = deref(doc, schema);
    expect(Object.keys(body.properties)).toEqual(['user', 'session']);
    expect(body.required).toEqual(['user', 'session']);
    const refs = [...refsOf(doc, schema)];
    expect(refs).toContain('#/components/schemas/switchboard.identity.v1.Account');
    expect(refs).toContain('#/components/schemas/switchboard.identity.v1.Session');

    const request = deref(doc, op.requestBody.content['application/json'].schema);
    expect(op.requestBody.required).toBe(true);
    expect(Object.keys(request.properties)).toEqual(['email', 'password', 'full_name']);
    expect(request.properties.full_name.type).toBe('string');
  });

  it("documents a success status beside the route's own, with when it is answered", () => {
    const responses = doc.paths['/v1/feedback'].post.responses as Record<string, Json>;
    expect(Object.keys(responses).filter((status) => status.startsWith('2'))).toEqual(['200', '201']);
    expect(responses['200'].description).toMatch(/^OK: The generation had a rating already/);
    expect(responses['200'].content).toEqual(responses['201'].content);
  });

  it('renders the response mapping: null for unset, never null when always set, omitted when marked, int64 as numbers', () => {
    const schemas = doc.components.schemas as Record<string, Json>;
    const account = schemas['switchboard.identity.v1.Account'];
    expect(account.required).toContain('full_name');
    expect(account.properties.full_name.type).toEqual(['string', 'null']);
    // always_set: present and never null, so the SDK types it `string`.
    expect(account.required).toContain('created_at');
    expect(account.properties.created_at).toMatchObject({ type: 'string', format: 'date-time' });
    expect(schemas['switchboard.keys.v1.Key'].properties.revoked_at).toMatchObject({ type: ['string', 'null'], format: 'date-time' });
    expect(schemas['switchboard.keys.v1.CreateKeyResponse'].properties.key).toMatchObject({ $ref: '#/components/schemas/switchboard.keys.v1.Key' });

    const key = schemas['switchboard.keys.v1.Key'];
    expect(key.required).not.toContain('signing_secret');
    expect(key.properties.signing_secret.type).toBe('string');
    expect(key.properties.monthly_spend_cap_usd.type).toEqual(['string', 'null']);

    const login = schemas['switchboard.identity.v1.LoginResponse'];
    expect(login.required ?? []).toEqual([]);
    expect(login.properties.session.$ref).toBe('#/components/schemas/switchboard.identity.v1.Session');

    const day = schemas['switchboard.billing.v1.UsageDay'];
    expect(day.properties.requests).toMatchObject({ type: 'integer', format: 'int64' });

    const list = schemas['switchboard.keys.v1.ListKeysResponse'];
    expect(list.required).toEqual(['data', 'has_more', 'next_cursor']);
    expect(list.properties.data).toEqual({ type: 'array', items: { $ref: '#/components/schemas/switchboard.keys.v1.Key' }, description: expect.any(String) });
    expect(list.properties.next_cursor.type).toEqual(['string', 'null']);

    const summary = schemas['switchboard.conversations.v1.FeedbackSummary'];
    expect(summary.properties.by_tag.type).toBe('object');
    expect(summary.properties.by_tag.additionalProperties.$ref).toBe('#/components/schemas/switchboard.conversations.v1.FeedbackCounts');

    const conversation = schemas['switchboard.conversations.v1.Conversation'];
    expect(conversation.properties.metadata.type).toBe('object'); // an unset Struct is written as {}
    expect(conversation.required).toContain('metadata');

    for (const [name, schema] of Object.entries(schemas)) {
      expect(JSON.stringify(schema), name).not.toContain('"nullable"');
    }
  });

  it('documents list routes with limit and after query parameters', () => {
    const op = find(doc, 'GET', '/v1/keys')!;
    const limit = op.parameters.find((p: Json) => p.name === 'limit');
    expect(limit).toMatchObject({ in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } });
    expect(op.parameters.find((p: Json) => p.name === 'after')).toMatchObject({ in: 'query' });
    expect(op.parameters.find((p: Json) => p.name === 'status')).toMatchObject({ in: 'query', schema: { type: 'string' } });
    expect(op.requestBody).toBeUndefined();

    const usage = find(doc, 'GET', '/v1/billing/usage')!;
    expect(usage.parameters.find((p: Json) => p.name === 'days')).toMatchObject({ in: 'query', schema: { minimum: 1, maximum: 365, default: 30 } });
  });

  it('documents path variables as required parameters and keeps them out of the body', () => {
    const op = find(doc, 'PATCH', '/v1/keys/{key_id}')!;
    expect(op.parameters.find((p: Json) => p.name === 'key_id')).toEqual({
      name: 'key_id',
      in: 'path',
      required: true,
      description: expect.any(String),
      schema: { type: 'string' },
    });
    const body = deref(doc, op.requestBody.content['application/json'].schema);
    expect(Object.keys(body.properties)).toEqual(['name', 'scopes', 'expires_at', 'allowed_models', 'rate_limits']);

    const test = find(doc, 'POST', '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/test')!;
    expect(test.requestBody.required).toBe(false);
    expect(Object.keys(test.responses)).toContain('202');
    expect(test.parameters.some((p: Json) => p.$ref === '#/components/parameters/WorkspaceId')).toBe(false);
    expect(find(doc, 'GET', '/v1/keys')!.parameters.some((p: Json) => p.$ref === '#/components/parameters/WorkspaceId')).toBe(true);
  });

  it('documents statuses: 204 without content, HTML for the sandbox page', () => {
    const del = find(doc, 'DELETE', '/v1/conversations/{id}')!;
    expect(del.responses['204']).toBeDefined();
    expect(del.responses['204'].content).toBeUndefined();
    const page = find(doc, 'GET', '/v1/billing/sandbox/checkout/{token}')!;
    expect(page.responses['200'].content['text/html'].schema).toEqual({ type: 'string' });
    const revoke = find(doc, 'DELETE', '/v1/keys/{key_id}')!;
    expect(revoke.responses['200'].content['application/json'].schema.$ref).toBe('#/components/schemas/switchboard.keys.v1.Key');
    const stripe = find(doc, 'POST', '/v1/billing/providers/stripe/webhook')!;
    expect(stripe.parameters.filter((p: Json) => !p.$ref)).toEqual([expect.objectContaining({ name: 'Stripe-Signature', in: 'header', required: true })]);
    expect(stripe.responses['204']).toBeDefined();
  });

  it('declares every path variable as a path parameter, and every security scheme it uses', () => {
    const schemes = new Set(Object.keys(doc.components.securitySchemes));
    for (const { method, path, op } of operations(doc)) {
      const label = `${method} ${path}`;
      const variables = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      const declared = (op.parameters ?? []).map((p: Json) => deref(doc, p)).filter((p: Json) => p.in === 'path');
      expect(
        declared.map((p: Json) => p.name),
        label,
      ).toEqual(variables);
      for (const p of declared) expect(p.required, label).toBe(true);
      for (const requirement of op.security as Json[]) for (const name of Object.keys(requirement)) expect(schemes.has(name), label).toBe(true);
    }
  });

  it('describes amounts that accept a number or a decimal string', () => {
    const op = find(doc, 'POST', '/v1/billing/checkout')!;
    const body = deref(doc, op.requestBody.content['application/json'].schema);
    // As its field states it (`(switchboard.api.v1.field).schema`): a google.protobuf.Value carries no protovalidate rules.
    expect(body.properties.amount_usd.anyOf).toEqual([
      { type: 'number', exclusiveMinimum: 0 },
      { type: 'string', pattern: expect.stringMatching(/^\^/) },
    ]);
    expect(body.properties.idempotency_key.type).toBe('string');
  });

  it('sets security by access', () => {
    const schemes = doc.components.securitySchemes;
    expect(schemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
    expect(schemes.apiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    for (const path of ['/v1/auth/register', '/v1/auth/login', '/v1/auth/login/2fa', '/v1/auth/refresh', '/v1/auth/password-reset', '/v1/auth/verify-email']) {
      const op = find(doc, 'POST', path)!;
      expect(op.security, path).toEqual([]);
      // A sign-in may answer 401 with its own codes, never the ones of missing credentials.
      expect(Object.keys(op.responses['401']?.content['application/json'].examples ?? {}), path).not.toContain('unauthenticated');
    }
    expect(find(doc, 'GET', '/v1/.well-known/jwks.json')!.security).toEqual([]);
    expect(find(doc, 'POST', '/v1/auth/logout')!.security).toEqual([{ bearerAuth: [] }]);
    expect(find(doc, 'GET', '/v1/keys')!.security).toEqual([{ bearerAuth: [] }, { apiKey: [] }]);
    expect(find(doc, 'GET', '/v1/keys')!.responses['401'].content['application/json'].examples.unauthenticated).toBeDefined();
  });

  it('shows who may call each operation, from the access options of the protos', () => {
    for (const { method, path, op } of [...operations(doc), ...operations(doc, true)]) {
      expect(op['x-switchboard-access'], `${method} ${path}`).toMatchObject({ rule: expect.any(String), credentials: expect.any(String) });
      expect(op.description, `${method} ${path}`).toMatch(/\n\nCredentials: .*\n\nAccess: [^\n]*$/);
    }
    expect(find(doc, 'POST', '/v1/keys')!['x-switchboard-access']).toEqual({
      rule: 'workspace',
      credentials: 'user_session_or_api_key',
      actions: [{ action: 'keys.create', describes: 'create keys', roles: ['owner', 'admin', 'developer'] }],
    });
    const revoke = find(doc, 'DELETE', '/v1/keys/{key_id}')!;
    expect(revoke['x-switchboard-access']).toEqual({
      rule: 'handler',
      credentials: 'user_session_or_api_key',
      actions: [{ action: 'keys.manage', describes: expect.any(String), roles: ['owner', 'admin'], roles_on_own_objects: ['owner', 'admin', 'developer'] }],
    });
    expect(revoke.description).toContain('owner or admin may change or revoke any key of the workspace; also the developer who created the object');
    expect(find(doc, 'POST', '/v1/billing/topup')!.description).toContain('Access: in the workspace of the request, the owner or admin may top up');
    const enroll = find(doc, 'POST', '/v1/account/2fa/enroll')!;
    expect(enroll['x-switchboard-access']).toEqual({ rule: 'account', credentials: 'user_session' });
    expect(enroll.description).toContain('`user_session_required`');
    expect(find(doc, 'POST', '/v1/auth/login')!['x-switchboard-access']).toEqual({ rule: 'public', credentials: 'none' });
    // The introduction carries the whole role × action table.
    expect(doc.info.description).toContain('| `billing.topup` | top up or check out | yes | yes | no |');
    expect(doc.info.description).toContain('| `keys.manage` | change or revoke any key of the workspace | yes | yes | own |');
  });

  it('shows the scope an API key needs on every operation that accepts one (docs/api/keys.md#scopes)', () => {
    const scopes: Record<string, number> = {};
    for (const { method, path, op } of operations(doc)) {
      const label = `${method} ${path}`;
      const examples = (status: string) => op.responses[status]?.content['application/json'].examples ?? {};
      if (op['x-switchboard-access'].credentials !== 'user_session_or_api_key') {
        // No API key gets that far: no scope, no insufficient_scope.
        expect(op['x-required-scope'], label).toBeUndefined();
        expect(examples('403').insufficient_scope, label).toBeUndefined();
        continue;
      }
      const scope: string = op['x-required-scope'];
      expect(['inference', 'read', 'manage'], label).toContain(scope);
      scopes[scope] = (scopes[scope] ?? 0) + 1;
      if (scope !== 'inference') expect(scope, label).toBe(method === 'GET' ? 'read' : 'manage');
      expect(op.description, label).toContain(`Credentials: A user access token or an API key. API keys need the \`${scope}\` scope`);
      expect(examples('403').insufficient_scope.value.error, label).toMatchObject({ code: 'insufficient_scope', metadata: { required_scope: scope } });
      expect(examples('401').api_key_expired, label).toBeDefined();
    }
    expect(scopes).toEqual({ inference: 3, read: expect.any(Number), manage: expect.any(Number) });
    for (const [method, path] of [
      ['GET', '/v1/key'],
      ['GET', '/v1/generations/{generation_id}'],
      ['POST', '/v1/feedback'],
    ])
      expect(find(doc, method, path)!['x-required-scope'], `${method} ${path}`).toBe('inference');
    expect(find(doc, 'GET', '/v1/generations')!['x-required-scope']).toBe('read');
    expect(find(doc, 'DELETE', '/v1/keys/{key_id}')!['x-required-scope']).toBe('manage');
    // Where a call grants scopes, the refusal says so too; rotation adds its own case to the route's.
    const descriptionOf = (method: string, path: string) => find(doc, method, path)!.responses['403'].description as string;
    expect(descriptionOf('POST', '/v1/keys')).toMatch(
      /`insufficient_scope`: The API key lacks the `manage` scope this operation needs, or `scopes` names one it lacks itself/,
    );
    expect(descriptionOf('POST', '/v1/keys/{key_id}/rotate')).toMatch(
      /`insufficient_scope`: The API key lacks the `manage` scope this operation needs .*Also: Called with an API key/,
    );
    // Expired keys are refused wherever a key is read, also on routes for user sessions only (the key is checked first).
    expect(find(doc, 'POST', '/v1/account/2fa/enroll')!.responses['401'].content['application/json'].examples.api_key_expired).toBeDefined();
  });

  it('gives every operation an id, a summary, a tag and error responses with the error schema', () => {
    const ids = new Set<string>();
    const tagNames = new Set((doc.tags as Json[]).map((t) => t.name));
    for (const { method, path, op } of operations(doc)) {
      const label = `${method} ${path}`;
      expect(op.operationId, label).toMatch(/^[A-Za-z]+Service_[A-Za-z]+$/);
      expect(ids.has(op.operationId), label).toBe(false);
      ids.add(op.operationId);
      expect(op.summary, label).toBeTruthy();
      expect(tagNames.has(op.tags[0]), label).toBe(true);
      expect(Array.isArray(op.security), label).toBe(true);
      const errors = Object.entries(op.responses as Record<string, Json>).filter(([status]) => status === 'default' || Number(status) >= 400);
      expect(
        errors.map(([s]) => s),
        label,
      ).toEqual(expect.arrayContaining(['400', '503', 'default']));
      for (const [status, response] of errors) {
        expect(deref(doc, response).content['application/json'].schema, `${label} ${status}`).toEqual({ $ref: '#/components/schemas/Error' });
      }
    }
    const error = doc.components.schemas.Error;
    expect(error.properties.error.required).toEqual(['code', 'message', 'field', 'request_id']);
    expect(error.properties.error.properties.field.type).toEqual(['string', 'null']);
  });

  it('shares error responses as components, one per status and set of cases, with shared examples', () => {
    const used = new Set<string>();
    for (const { method, path, op } of [...operations(shared), ...operations(shared, true)]) {
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        if (status !== 'default' && Number(status) < 400) continue;
        expect(response.$ref, `${method} ${path} ${status}`).toMatch(/^#\/components\/responses\//);
        used.add(response.$ref.split('/').pop());
      }
    }
    const responses = shared.components.responses as Record<string, Json>;
    expect(Object.keys(responses).sort()).toEqual([...used].sort());
    // One component per distinct response: none is a copy of another.
    const texts = Object.values(responses).map((r) => JSON.stringify(r));
    expect(new Set(texts).size).toBe(texts.length);
    const examples = shared.components.examples as Record<string, Json>;
    for (const [name, response] of Object.entries(responses)) {
      for (const example of Object.values(response.content['application/json'].examples as Record<string, Json>)) {
        expect(example.$ref, name).toMatch(/^#\/components\/examples\//);
        expect(examples[example.$ref.split('/').pop()], name).toBeDefined();
      }
    }
    expect(Object.values(examples).map((e) => JSON.stringify(e)).length).toBe(new Set(Object.values(examples).map((e) => JSON.stringify(e))).size);
  });

  it('documents Idempotency-Key on every POST, and the rate-limit headers on every answer (docs/conventions.md#idempotency, #rate-limits)', () => {
    expect(shared.components.parameters.IdempotencyKey).toMatchObject({
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    });
    for (const { method, path, op } of operations(doc)) {
      const label = `${method} ${path}`;
      const refs = (op.parameters ?? []).map((p: Json) => p.$ref);
      expect(refs.includes('#/components/parameters/IdempotencyKey'), label).toBe(method === 'POST');
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        const headers = Object.keys(response.headers ?? {});
        expect(headers, `${label} ${status}`).toEqual(expect.arrayContaining(['X-Request-Id', 'RateLimit-Policy', 'RateLimit']));
        expect(headers.includes('Retry-After'), `${label} ${status}`).toBe(status === '429' || status === '503');
        if (Number(status) < 300) expect(headers.includes('Idempotent-Replayed'), `${label} ${status}`).toBe(method === 'POST');
      }
      const codes = (status: string) => Object.values(op.responses[status]?.content['application/json'].examples ?? {}).map((e) => (e as Json).value.error);
      expect(
        codes('429').map((e: Json) => e.code),
        label,
      ).toContain('rate_limited');
      if (method !== 'POST') continue;
      expect(codes('400'), label).toContainEqual(expect.objectContaining({ code: 'invalid_request', field: 'Idempotency-Key' }));
      expect(
        codes('422').map((e: Json) => e.code),
        label,
      ).toContain('idempotency_key_reused');
    }
    // The top-up's own body field and the header share the code: both cases are described.
    expect(find(doc, 'POST', '/v1/billing/topup')!.responses['422'].description).toMatch(/`Idempotency-Key`.*Also: /s);
    const headers = shared.components.headers;
    expect(headers['RateLimit-Policy'].example).toMatch(/^"default";q=\d+;w=60$/);
    expect(headers.RateLimit.example).toMatch(/^"default";r=\d+;t=\d+$/);
  });

  it('documents the front door: chat completions (JSON and streamed) and the model list, API keys only, OpenAI-shaped errors (docs/api/front-door.md)', () => {
    const completions = doc.paths['/v1/chat/completions'].post;
    expect(completions.security).toEqual([{ apiKey: [] }]);
    expect(completions['x-required-scope']).toBe('inference');
    // The REST surface's Idempotency-Key and RateLimit do not apply; the key's own x-ratelimit-* do.
    expect((completions.parameters as Json[]).map((p) => p.name)).toEqual(['X-Service-Conversation-Id']);
    const ok = completions.responses['200'];
    expect(Object.keys(ok.content)).toEqual(['application/json', 'text/event-stream']);
    expect(Object.keys(ok.headers)).toEqual(expect.arrayContaining(['X-Service-Generation-Id', 'X-Service-Overhead-Ms', 'x-ratelimit-remaining-requests']));
    expect(Object.keys(ok.headers)).not.toContain('RateLimit');
    expect(ok.content['text/event-stream'].example).toMatch(/"service":\{"generation_id".*\n\ndata: \[DONE\]\n\n$/s);
    const request = shared.components.schemas.ChatCompletionRequest;
    expect(request.additionalProperties).toBe(false);
    expect(request.required).toEqual(['model', 'messages']);
    expect(request.properties.n).toMatchObject({ minimum: 1, maximum: 16 });
    expect(shared.components.schemas.ChatCompletionService.properties.region.enum).toEqual(['cn', 'overseas']);

    const codes = (op: Json, status: string) => Object.values(op.responses[status].content['application/json'].examples).map((e) => (e as Json).value.error);
    expect(codes(completions, '400').map((e: Json) => e.code)).toEqual([
      'invalid_request',
      'invalid_json',
      'unsupported_parameter',
      'model_unavailable',
      'upstream_rejected',
    ]);
    expect(codes(completions, '402').map((e: Json) => e.code)).toEqual(['spend_cap_exceeded', 'insufficient_balance']);
    expect(codes(completions, '403')).toContainEqual(expect.objectContaining({ code: 'model_not_allowed', type: 'permission_error', param: 'model' }));
    expect(codes(completions, '429')).toEqual([expect.objectContaining({ code: 'rate_limit_exceeded', type: 'rate_limit_error' })]);
    expect(codes(completions, '502')).toEqual([expect.objectContaining({ code: 'upstream_error', type: 'api_error' })]);
    expect(completions.responses['429'].headers['Retry-After']).toBeDefined();
    for (const status of ['400', '401', '402', '403', '404', '413', '415', '429', '502', '503', 'default']) {
      expect(shared.paths['/v1/chat/completions'].post.responses[status].$ref, status).toMatch(/^#\/components\/responses\/FrontDoor/);
      expect(completions.responses[status].content['application/json'].schema, status).toEqual({ $ref: '#/components/schemas/FrontDoorError' });
    }

    const models = doc.paths['/v1/models'].get;
    expect(models.security).toEqual([{ apiKey: [] }]);
    expect(models.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/ModelList' });
    expect(Object.keys(models.responses).sort()).toEqual(['200', '401', '403', '503', 'default']);
    expect(shared.components.schemas.Model.properties.owned_by.enum).toEqual(['switchboard', 'upstream', 'switchboard-demo']);
  });

  it('describes the front door’s own errors as the error catalogue has them (runtime/src/error-catalogue.ts)', () => {
    const catalogue = new Map<string, { status: number; when: string }>(Object.values(errorCatalogue).map((e) => [e.code, e]));
    // The conversations service's refusal, declared in its proto, not answered by the data plane itself.
    const fromServices = new Set(['conversation_not_found']);
    const completions = doc.paths['/v1/chat/completions'].post;
    const seen = new Set<string>();
    for (const op of [completions, doc.paths['/v1/models'].get]) {
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        if (status === '200') continue;
        for (const example of Object.values(response.content['application/json'].examples as Record<string, Json>)) {
          const { code } = example.value.error;
          seen.add(code);
          if (fromServices.has(code)) continue;
          expect(catalogue.get(code)?.status, code).toBe(status === 'default' ? 500 : Number(status));
        }
      }
    }
    expect([...seen]).toEqual(
      expect.arrayContaining(['invalid_request', 'model_unavailable', 'upstream_rejected', 'routing_policy_violation', 'upstream_error']),
    );
    // The same words as the catalogue's, where the front door has no more precise ones.
    const examples = (status: string) => Object.values(completions.responses[status].content['application/json'].examples as Record<string, Json>);
    for (const entry of [
      errorCatalogue.modelUnavailable,
      errorCatalogue.upstreamRejected,
      errorCatalogue.routingPolicyViolation,
      errorCatalogue.upstreamError,
    ]) {
      expect(examples(String(entry.status)), entry.code).toContainEqual(expect.objectContaining({ summary: entry.when }));
    }
    // A stream's last event has no status of its own: its codes are in the description.
    for (const entry of [errorCatalogue.streamTooLong, errorCatalogue.upstreamError, errorCatalogue.serviceUnavailable]) {
      expect(completions.description).toContain(`\`${entry.code}\``);
    }
  });

  it('lists every event type of the catalog under webhooks, with its schema, an example that fits it, and the signature headers', () => {
    const catalog = webhookEventCatalog();
    expect(Object.keys(doc.webhooks)).toEqual(catalog.map((entry) => entry.type));
    expect(Object.keys(doc.webhooks)).toEqual(
      expect.arrayContaining(['agent.completed', 'key.revoked', 'webhook.delivery.exhausted', 'webhook.endpoint.recovered']),
    );
    const ajv = new Ajv2020({ strict: true });
    formats.default(ajv);
    const ids = new Set<string>();
    for (const entry of catalog) {
      const op = doc.webhooks[entry.type].post as Json;
      expect(op.summary).toBe(entry.type);
      expect(op.description).toContain(entry.description);
      expect(op.security).toEqual([]);
      expect(ids.has(op.operationId), entry.type).toBe(false);
      ids.add(op.operationId);
      expect(op.parameters.map((p: Json) => `${p.in}:${p.name}`)).toEqual(['header:webhook-id', 'header:webhook-timestamp', 'header:webhook-signature']);
      const body = op.requestBody.content['application/json'];
      expect(body.schema).toEqual(entry.schema);
      expect(body.example).toEqual(entry.example);
      const validate = ajv.compile(body.schema);
      expect(validate(body.example), `${entry.type}: ${ajv.errorsText(validate.errors)}`).toBe(true);
      expect(Object.keys(op.responses).sort()).toEqual(['2XX', '410']);
    }
    const revoked = doc.webhooks['key.revoked'].post.requestBody.content['application/json'].schema;
    expect(revoked.required).toEqual(['id', 'type', 'timestamp', 'data']);
    expect(revoked.properties.data.properties.revoked_by).toMatchObject({ type: ['string', 'null'], description: expect.stringMatching(/null for automatic/) });
  });
});

describe('/docs', () => {
  let server: http.Server;
  let base: string;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const { pathname } = new URL(req.url ?? '/', 'http://localhost');
      handleDocs(pathname, res).then(
        (handled) => {
          if (!handled) {
            res.statusCode = 404;
            res.end('not docs');
          }
        },
        () => {
          res.statusCode = 500;
          res.end();
        },
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('serves the page with a strict CSP and only local assets', async () => {
    const res = await fetch(`${base}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self' 'unsafe-inline'");
    expect(csp).toContain("img-src 'self' data:");
    expect(res.headers.get('cache-control')).toBe('no-cache');
    const page = await res.text();
    expect(page).not.toMatch(/https?:\/\//);
    expect(page).not.toMatch(/<script>/); // no inline script
    const sources = [...page.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    for (const src of sources.filter((s) => s.startsWith('/docs/assets/'))) {
      const asset = await fetch(`${base}${src}`);
      expect(asset.status, src).toBe(200);
      await asset.arrayBuffer();
    }
    expect((await fetch(`${base}/docs/`)).status).toBe(200);
  });

  it('serves assets with content types, caching and revalidation', async () => {
    const js = await fetch(`${base}/docs/assets/swagger-ui-bundle.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toContain('max-age=');
    expect((await js.text()).length).toBeGreaterThan(100_000);
    const css = await fetch(`${base}/docs/assets/swagger-ui.css`);
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    const etag = css.headers.get('etag')!;
    await css.arrayBuffer();
    const again = await fetch(`${base}/docs/assets/swagger-ui.css`, { headers: { 'If-None-Match': etag } });
    expect(again.status).toBe(304);
    const init = await fetch(`${base}/docs/assets/init.js`);
    expect(await init.text()).toContain('"/v1/openapi.json"');
  });

  it('ignores other paths and never leaves the whitelist', async () => {
    for (const path of [
      '/docs/assets/package.json',
      '/docs/assets/../../package.json',
      '/docs/assets/%2e%2e%2fpackage.json',
      '/docs/assets/index.html',
      '/docsx',
      '/v1/openapi.json',
    ]) {
      const res = await fetch(`${base}${path}`);
      expect(res.status, path).toBe(404);
      expect(await res.text(), path).toBe('not docs');
    }
    const post = await fetch(`${base}/docs`, { method: 'POST' });
    expect(post.status).toBe(405);
  });
});
