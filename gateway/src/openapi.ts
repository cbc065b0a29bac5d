import { ErrorResponses } from './openapi/errors.js';
import { frontDoorHeaders, frontDoorPaths, frontDoorSchemas, frontDoorTag } from './openapi/front-door.js';
import { headerComponents, IDEMPOTENCY_KEY_PARAMETER, idempotencyKeyParameter } from './openapi/headers.js';
import { describeApi } from './openapi/introduction.js';
import type { Json } from './openapi/json-schema.js';
import { operationOf, responseOf, tagOf } from './openapi/operations.js';
import { Schemas } from './openapi/schemas.js';
import { securitySchemes } from './openapi/security.js';
import { webhooksOf } from './openapi/webhooks.js';
import { type Route, unversionedAlias } from './routes.js';

/**
 * The OpenAPI 3.1 document of the REST surface, generated from the same routes the gateway
 * serves (docs/api/overview.md#the-contract-is-the-protos, docs/conventions.md). Schemas describe the gateway's JSON mapping exactly:
 *
 * - requests: proto field names; path variables from the template; for body "*" the other
 *   fields are the JSON body, for GET/DELETE they are query parameters;
 * - responses: every field is always present (unset message fields and unset `optional`
 *   scalars are null, repeated fields [], maps {}), except fields marked
 *   `(switchboard.api.v1.field).omit_if_unset`, which are left out when unset, and those
 *   marked `always_set`, which the handler never leaves unset (not nullable); 64-bit
 *   integers are JSON numbers; well-known types use their proto3 JSON forms.
 *
 * - limits: the protovalidate rules of each field (`(buf.validate.field)`, the ones the services
 *   validate with) as `enum`, `minLength`, `maxLength`, `pattern`, `minimum`, `maximum`, `maxItems`…
 *
 * The output is deterministic: paths follow the order of the routes, then the front door's;
 * components are sorted. By concern: openapi/schemas.ts (components.schemas, from the messages),
 * openapi/rules.ts (their limits), openapi/operations.ts (an operation per route),
 * openapi/errors.ts (error responses shared as components, from the catalogue in
 * runtime/src/error-catalogue.ts), openapi/headers.ts (Idempotency-Key, rate limits),
 * openapi/security.ts (credentials and access rules), openapi/front-door.ts (the OpenAI-compatible
 * routes of the data plane), openapi/introduction.ts (info.description), openapi/webhooks.ts
 * (the event catalog as `webhooks`).
 */

export interface OpenApiInfo {
  /** info.version of the document (default "1.0.0"). */
  version?: string;
  /** The server URL (default "/": the origin the document was fetched from). */
  serverUrl?: string;
}

/** Builds the OpenAPI 3.1 document of the given routes (the canonical /v1 templates). */
export function buildOpenApiDocument(routes: Route[], info: OpenApiInfo = {}): Json {
  const schemas = new Schemas();
  const errors = new ErrorResponses();
  // Responses first, so messages used in both directions keep their plain name for the output form.
  for (const route of routes) responseOf(route, schemas);

  const paths: Record<string, Record<string, Json>> = {};
  const tags = new Map<string, Json>();
  const aliased = new Set<string>();
  for (const route of routes) {
    const service = route.method.parent;
    const tag = service.name.replace(/Service$/, '') || service.name;
    if (!tags.has(tag)) tags.set(tag, tagOf(tag, service, route.owner));
    if (unversionedAlias(route)) aliased.add(`/${(route.segments[1] as { literal: string }).literal}`);

    paths[route.template] ??= {};
    const item = paths[route.template];
    const verb = route.httpMethod.toLowerCase();
    if (item[verb]) throw new Error(`OpenAPI: two routes for ${route.httpMethod} ${route.template}`);
    item[verb] = operationOf(route, tag, schemas, errors);
  }

  // The OpenAI-compatible routes the gateway forwards to the data plane (docs/api/front-door.md).
  Object.assign(paths, frontDoorPaths(errors));
  tags.set(frontDoorTag.name as string, frontDoorTag);
  const groups = [...aliased].sort();
  const shared = errors.components();
  return {
    openapi: '3.1.0',
    info: {
      title: 'Switchboard API',
      version: info.version ?? '1.0.0',
      description: describeApi(groups),
    },
    servers: [{ url: info.serverUrl ?? '/', description: info.serverUrl ? 'Switchboard gateway' : 'This gateway' }],
    tags: [...tags.values()],
    paths,
    webhooks: webhooksOf(),
    components: {
      securitySchemes,
      schemas: schemas.sorted(frontDoorSchemas),
      responses: shared.responses,
      examples: shared.examples,
      parameters: {
        [IDEMPOTENCY_KEY_PARAMETER]: idempotencyKeyParameter,
        WorkspaceId: {
          name: 'X-Workspace-Id',
          in: 'header',
          required: false,
          description:
            'The workspace (organization id) a user request acts in; the caller must be a member. Default: the personal workspace. An API key always acts in its own workspace (another id is a 403).',
          schema: { type: 'string' },
        },
      },
      headers: { ...headerComponents, ...frontDoorHeaders },
    },
  };
}
