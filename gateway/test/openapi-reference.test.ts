import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { webhookEventCatalog } from '@switchboard/contracts/webhook-events';
import { openAiErrorTypes } from '@switchboard/runtime/openai-error-type';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from '../src/openapi.js';
import { buildRoutes } from '../src/routes.js';
import { inlineShared, type Json } from './openapi-fixture.js';

// The API reference is as good as its protos: every operation, schema and property described,
// an example per request and response that matches its schema, and the real error codes of each
// operation. Each check collects every offender, so one run lists all there is to fix.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const verbs = ['get', 'put', 'post', 'patch', 'delete'] as const;

function operations(doc: Json): Array<{ label: string; op: Json }> {
  return Object.entries(doc.paths as Record<string, Json>).flatMap(([p, item]) =>
    verbs.filter((v) => item[v]).map((v) => ({ label: `${v.toUpperCase()} ${p}`, op: item[v] as Json })),
  );
}

/** The TypeScript the components run (not their tests): where an error code must be written. */
function sourceText(): string {
  const dirs = ['gateway/src', 'runtime/src', 'data-plane/src', ...readdirSync(path.join(root, 'services')).map((s) => `services/${s}/src`)];
  const texts: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const file = path.join(dir, name);
      if (statSync(file).isDirectory()) walk(file);
      else if (name.endsWith('.ts') && file !== path.join(root, 'gateway/src/openapi.ts')) texts.push(readFileSync(file, 'utf8'));
    }
  };
  for (const dir of dirs) walk(path.join(root, dir));
  return texts.join('\n');
}

/** Every `enum` of the document, by where it is: `Schema.property` (`[]` for items) or `METHOD path ?parameter`. */
/** The actions of the audit log's catalogue, as docs/api/audit.md#actions lists them (the first column of its tables). */
function catalogueOfAuditActions(): string[] {
  const text = readFileSync(path.join(root, 'docs/api/audit.md'), 'utf8');
  const section = text.slice(text.indexOf('\n## Actions\n'), text.indexOf('\n## ', text.indexOf('\n## Actions\n') + 1));
  return [...section.matchAll(/^\| `([a-z_.]+)` /gm)].map((match) => match[1]);
}

function enumsOf(doc: Json): Record<string, unknown[]> {
  const found: Record<string, unknown[]> = {};
  const walk = (node: unknown, at: string): void => {
    if (!node || typeof node !== 'object') return;
    const schema = node as Json;
    if (Array.isArray(schema.enum)) found[at] = schema.enum;
    for (const [name, property] of Object.entries((schema.properties ?? {}) as Json)) walk(property, `${at}.${name}`);
    if (schema.items) walk(schema.items, `${at}[]`);
    for (const key of ['anyOf', 'oneOf', 'allOf']) for (const sub of schema[key] ?? []) walk(sub, at);
  };
  for (const [name, schema] of Object.entries(doc.components.schemas as Record<string, Json>)) walk(schema, name);
  for (const [name, header] of Object.entries(doc.components.headers as Record<string, Json>)) walk(header.schema, `header ${name}`);
  for (const { label, op } of operations(doc)) {
    for (const parameter of op.parameters ?? []) if (!parameter.$ref) walk(parameter.schema, `${label} ?${parameter.name}`);
  }
  return found;
}

/** Every property of a schema that has no description, with its path. */
function undescribed(schema: unknown, at: string, out: string[]): void {
  if (!schema || typeof schema !== 'object') return;
  const node = schema as Json;
  for (const [name, property] of Object.entries((node.properties ?? {}) as Json)) {
    if (typeof property.description !== 'string' || property.description.trim() === '') out.push(`${at}.${name}`);
    undescribed(property, `${at}.${name}`, out);
  }
  for (const key of ['items', 'additionalProperties']) if (node[key]) undescribed(node[key], `${at}[]`, out);
  for (const key of ['anyOf', 'oneOf', 'allOf']) for (const sub of node[key] ?? []) undescribed(sub, at, out);
}

describe('API reference', () => {
  const routes = buildRoutes();
  const shared = buildOpenApiDocument(routes) as Json;
  const doc = inlineShared(shared);
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  formats.default(ajv);
  ajv.addSchema({ ...shared, $id: 'openapi.json' });
  /** Validates a value against a schema of the document; the errors in words, or []. */
  const check = (schema: Json, value: unknown): string[] => {
    const validate = ajv.compile(rebased(schema));
    return validate(value) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`);
  };
  /** A schema whose local $refs point into the registered document. */
  const rebased = (schema: Json): Json => JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"openapi.json#/components/'));

  it('gives every operation a description of its own, before the access lines', () => {
    const missing = operations(doc)
      .filter(({ op }) => (op.description as string).replace(/^\*\*Not built yet:\*\*[^\n]*\n\n/, '').startsWith('\n\nCredentials:'))
      .map(({ label }) => label);
    expect(missing).toEqual([]);
  });

  it('describes every tag as a resource, keeping the proto service for mesh callers', () => {
    for (const tag of doc.tags as Json[]) {
      expect(tag.description, tag.name).not.toBe(tag.name);
      expect(tag.description, tag.name).not.toMatch(/switchboard\.\w+\.v1|Service\b/);
      // The front door is the data plane's, not a proto service.
      if (tag['x-switchboard-component'] === 'data-plane') expect(tag['x-switchboard-service'], tag.name).toBeUndefined();
      else expect(tag['x-switchboard-service'], tag.name).toMatch(/^switchboard\.\w+\.v1\.\w+Service$/);
    }
  });

  it('gives every request and response body an example that matches its schema', () => {
    const problems: string[] = [];
    for (const { label, op } of operations(doc)) {
      const bodies: Array<[string, Json | undefined]> = [['request', op.requestBody?.content?.['application/json']]];
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        if (Number(status) < 300) bodies.push([`response ${status}`, response.content?.['application/json']]);
      }
      for (const [what, media] of bodies) {
        // A raw body (a provider's signed webhook) has no schema to follow.
        if (!media || Object.keys(media.schema).length === 0) continue;
        if (media.example === undefined) {
          problems.push(`${label} ${what}: no example`);
          continue;
        }
        for (const error of check(media.schema, media.example)) problems.push(`${label} ${what}: example ${error}`);
        // The schema carries it too (JSON Schema `examples`), for readers of the components.
        const component = media.schema.$ref ? doc.components.schemas[media.schema.$ref.split('/').pop()] : undefined;
        if (component && !Array.isArray(component.examples)) problems.push(`${label} ${what}: schema ${media.schema.$ref} has no examples`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('describes every property of every schema', () => {
    const missing: string[] = [];
    for (const [name, schema] of Object.entries(doc.components.schemas as Record<string, Json>)) undescribed(schema, name, missing);
    for (const { label, op } of operations(doc)) {
      for (const parameter of op.parameters ?? []) {
        if (!parameter.$ref && !parameter.description) missing.push(`${label} parameter ${parameter.name}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('lists the error responses of every operation, each code one a component can return, with an example body', () => {
    const source = sourceText();
    const problems: string[] = [];
    for (const { label, op } of operations(doc)) {
      const errors = Object.entries(op.responses as Record<string, Json>).filter(([status]) => status === 'default' || Number(status) >= 400);
      if (errors.length === 0) problems.push(`${label}: no error responses`);
      for (const [status, response] of errors) {
        const examples = response.content['application/json'].examples as Record<string, Json>;
        for (const [name, example] of Object.entries(examples)) {
          const { code } = example.value.error;
          if (!source.includes(`'${code}'`)) problems.push(`${label} ${status}: no component returns \`${code}\``);
          // Named by its code, or by its case where two share one (`invalid_idempotency_key`).
          if (!/^[a-z][a-z0-9_]*$/.test(name)) problems.push(`${label} ${status}: the example ${name} of ${code} is not named by its case`);
          for (const error of check(response.content['application/json'].schema, example.value)) problems.push(`${label} ${status} ${code}: ${error}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('lists the errors a sign-in really answers, with the codes of the contract', () => {
    const login = doc.paths['/v1/auth/login'].post;
    expect(Object.keys(login.responses['401'].content['application/json'].examples)).toEqual(['invalid_credentials']);
    expect(login.responses['429'].headers['Retry-After']).toBeDefined();
    expect(login.responses['429'].content['application/json'].examples.too_many_attempts.value.error.metadata).toEqual({ retry_after_seconds: 30 });
    for (const p of ['/v1/auth/login/2fa', '/v1/auth/refresh']) expect(doc.paths[p].post.responses['401'], p).toBeDefined();
    // A route with credentials lists the gateway's own codes, derived from its shape.
    const keys = doc.paths['/v1/keys'].get;
    expect(Object.keys(keys.responses['401'].content['application/json'].examples)).toEqual(
      expect.arrayContaining(['unauthenticated', 'token_expired', 'invalid_api_key', 'api_key_revoked']),
    );
    expect(keys.responses['413']).toBeUndefined();
  });

  it("states every closed set as an enum, from the protos' rules (docs/conventions.md#input-rules)", () => {
    // The front door's sets are written in gateway/src/openapi/front-door.ts; the others are the protos' rules.
    const events = webhookEventCatalog().map((entry) => entry.type);
    const auditActions = catalogueOfAuditActions();
    expect(auditActions).toHaveLength(27);
    expect(enumsOf(shared)).toEqual({
      'ChatCompletionService.tier': ['fast', 'balanced', 'passthrough'],
      'ChatCompletionService.region': ['cn', 'overseas'],
      'FrontDoorError.error.type': [...openAiErrorTypes],
      'Model.owned_by': ['switchboard', 'upstream', 'switchboard-demo'],
      'Model.region': ['cn', 'overseas'],
      'Model.tiers[]': ['fast', 'balanced'],
      'switchboard.billing.v1.AutoTopup.disabled_reason': ['charge_failures', 'payment_method_removed', null],
      'switchboard.billing.v1.Balance.currency': ['USD'],
      'switchboard.billing.v1.BilledModelPrice.region': ['overseas', 'cn'],
      'switchboard.billing.v1.BilledModelPrice.tiers[]': ['fast', 'balanced'],
      'switchboard.billing.v1.BilledTierPrice.tier': ['fast', 'balanced'],
      'switchboard.billing.v1.Checkout.status': ['pending', 'completed', 'expired', 'failed'],
      'switchboard.billing.v1.CompleteSandboxSetupRequest.card': ['4242', '0341'],
      'switchboard.billing.v1.GenerationRecord.tier': ['fast', 'balanced', 'passthrough', 'byok'],
      'switchboard.billing.v1.GenerationRecord.region': ['overseas', 'cn', null],
      'switchboard.billing.v1.GenerationRecord.status': ['completed', 'client_closed', 'upstream_error', null],
      'switchboard.billing.v1.LedgerEntry.type': ['free_credit', 'topup', 'auto_topup', 'usage', 'refund', 'dispute', 'adjustment', 'plan_fee'],
      'switchboard.billing.v1.Statement.currency': ['USD'],
      'switchboard.billing.v1.UsageReport.bucket': ['hour', 'day'],
      'switchboard.billing.v1.UsageReportRow.tier': ['fast', 'balanced', 'passthrough', 'byok'],
      'switchboard.billing.v1.UsageReportRow.region': ['overseas', 'cn', ''],
      'switchboard.conversations.v1.CreateMessageRequest.role': ['user', 'assistant', 'system', 'tool'],
      'switchboard.conversations.v1.Feedback.rating': [1, -1],
      'switchboard.conversations.v1.Message.role': ['user', 'assistant', 'system', 'tool'],
      'switchboard.conversations.v1.RecordFeedbackRequest.rating': [1, -1],
      'switchboard.identity.v1.AuditActor.type': ['user', 'api_key', 'system'],
      'switchboard.identity.v1.AuditEvent.action': auditActions,
      'switchboard.identity.v1.AuditEvent.outcome': ['success', 'denied', 'failed'],
      'switchboard.identity.v1.CreateInvitationRequest.role': ['admin', 'developer'],
      'switchboard.identity.v1.DataExport.status': ['pending', 'ready', 'expired'],
      'switchboard.identity.v1.Invitation.role': ['admin', 'developer'],
      'switchboard.identity.v1.Invitation.status': ['pending', 'accepted', 'expired', 'revoked'],
      'switchboard.identity.v1.Jwk.kty': ['EC'],
      'switchboard.identity.v1.Jwk.crv': ['P-256'],
      'switchboard.identity.v1.Jwk.alg': ['ES256'],
      'switchboard.identity.v1.Jwk.use': ['sig'],
      'switchboard.identity.v1.LogoutRequest.scope': ['local', 'others', 'global'],
      'switchboard.identity.v1.Member.role': ['owner', 'admin', 'developer'],
      'switchboard.identity.v1.Organization.role': ['owner', 'admin', 'developer'],
      'switchboard.identity.v1.Session.token_type': ['Bearer'],
      'switchboard.identity.v1.UpdateMemberRequest.role': ['admin', 'developer'],
      'switchboard.keys.v1.CreateKeyRequest.routing_policy': ['cn-only', 'overseas-only', 'any'],
      'switchboard.keys.v1.CreateKeyRequest.scopes[]': ['inference', 'read', 'manage'],
      'switchboard.keys.v1.CurrentKey.routing_policy': ['cn-only', 'overseas-only', 'any'],
      'switchboard.keys.v1.CurrentKey.scopes[]': ['inference', 'read', 'manage'],
      'switchboard.keys.v1.CurrentKeySpend.period': ['day', 'week', 'month', 'total'],
      'switchboard.keys.v1.Key.status': ['active', 'revoked'],
      'switchboard.keys.v1.Key.routing_policy': ['cn-only', 'overseas-only', 'any'],
      'switchboard.keys.v1.Key.scopes[]': ['inference', 'read', 'manage'],
      'switchboard.keys.v1.SetRoutingPolicyRequest.routing_policy': ['cn-only', 'overseas-only', 'any'],
      'switchboard.keys.v1.SpendLimit.period': ['day', 'week', 'month', 'total'],
      'switchboard.keys.v1.SpendLimitStatus.period': ['day', 'week', 'month', 'total'],
      'switchboard.keys.v1.UpdateKeyRequest.scopes[]': ['inference', 'read', 'manage'],
      'switchboard.webhooks.v1.CreateWebhookRequest.events[]': events,
      'switchboard.webhooks.v1.Delivery.event_type': events,
      'switchboard.webhooks.v1.Delivery.status': ['pending', 'succeeded', 'failed', 'exhausted'],
      'switchboard.webhooks.v1.DeliveryAttempt.status': ['success', 'failed'],
      'switchboard.webhooks.v1.DeliveryAttempt.error_class': ['dns', 'connect', 'tls', 'timeout', 'blocked_address', 'http', null],
      'switchboard.webhooks.v1.DeliveryAttempt.trigger': ['event', 'retry', 'manual', 'test'],
      'switchboard.webhooks.v1.UpdateWebhookRequest.events[]': events,
      'switchboard.webhooks.v1.Webhook.events[]': events,
      'switchboard.webhooks.v1.Webhook.disabled_reason': ['manual', 'endpoint_gone', 'failing', 'organization_deleted', null],
      'switchboard.webhooks.v1.WebhookEventType.type': events,
      'header Idempotent-Replayed': ['true'],
      'POST /v1/auth/logout ?scope': ['local', 'others', 'global'],
      'GET /v1/keys ?status': ['active', 'revoked'],
      'GET /v1/usage ?bucket': ['hour', 'day'],
      'GET /v1/usage ?format': ['json', 'csv'],
      'GET /v1/audit-events ?action': auditActions,
      'GET /v1/conversations/{conversation_id}/messages ?order': ['asc', 'desc'],
      'GET /v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries ?status': ['pending', 'succeeded', 'failed', 'exhausted'],
    });
  });

  it('marks the fields a request needs', () => {
    expect(doc.components.schemas['switchboard.identity.v1.LoginRequest'].required).toEqual(['email', 'password']);
  });

  it('marks an operation that is declared but not built', () => {
    const [first, ...rest] = routes;
    const marked = inlineShared(buildOpenApiDocument([{ ...first, unbuilt: true }, ...rest]) as Json);
    const op = marked.paths[first.template][first.httpMethod.toLowerCase()];
    expect(op.summary).toMatch(/^\(Not built yet\) /);
    expect(op['x-switchboard-unbuilt']).toBe(true);
    expect(op.description).toMatch(/^\*\*Not built yet:\*\*/);
    expect(Object.keys(op.responses['501'].content['application/json'].examples)).toEqual(['not_implemented']);
    expect(doc.paths[first.template][first.httpMethod.toLowerCase()]['x-switchboard-unbuilt']).toBeUndefined();
  });
});
