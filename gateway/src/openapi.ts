import { STATUS_CODES } from 'node:http';
import { type DescEnum, type DescField, type DescMessage, getOption, hasOption, ScalarType } from '@bufbuild/protobuf';
import { field as fieldRule } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { type Action, type Credentials, type Permission, permissions, type RpcRule, roles } from '@switchboard/runtime/policy';
import { type Route, readsFromQuery, unversionedAlias } from './routes.js';

/**
 * The OpenAPI 3.1 document of the REST surface, generated from the same routes the gateway
 * serves (SPEC §1, §2). Schemas describe the gateway's JSON mapping exactly:
 *
 * - requests: proto field names; path variables from the template; for body "*" the other
 *   fields are the JSON body, for GET/DELETE they are query parameters;
 * - responses: every field is always present (unset message fields and unset `optional`
 *   scalars are null, repeated fields [], maps {}), except fields marked
 *   `(switchboard.api.v1.field).omit_if_unset`, which are left out when unset; 64-bit
 *   integers are JSON numbers; well-known types use their proto3 JSON forms.
 *
 * The output is deterministic: paths follow the order of the routes, components are sorted.
 */

/** A JSON Schema (2020-12) or OpenAPI object. */
type Json = Record<string, unknown>;

export interface OpenApiInfo {
  /** info.version of the document (default "1.0.0"). */
  version?: string;
  /** The server URL (default "/": the origin the document was fetched from). */
  serverUrl?: string;
}

const ERROR_SCHEMA = 'Error';
const ERROR_REF = `#/components/schemas/${ERROR_SCHEMA}`;

/** Shared error responses, by status (SPEC §2). */
const errorResponses: Array<{ status: string; name: string; description: string; retryAfter?: boolean }> = [
  { status: '400', name: 'BadRequest', description: 'Invalid input (`field` names it), or a wrong or expired token (`invalid_token`).' },
  { status: '401', name: 'Unauthorized', description: 'No credentials, or bad, expired or revoked ones.' },
  {
    status: '402',
    name: 'PaymentRequired',
    description:
      'The API key reached its monthly spend cap (`spend_cap_exceeded`, with `metadata: {scope, cap_usd, spend_usd, resets_at}`). Not retryable before `resets_at`.',
  },
  { status: '403', name: 'Forbidden', description: 'Authenticated but not allowed (role, failed re-authentication).' },
  { status: '404', name: 'NotFound', description: "Not found, or not visible to the caller (another tenant's objects are 404, never 403)." },
  { status: '409', name: 'Conflict', description: 'Conflicts with the current state.' },
  { status: '413', name: 'PayloadTooLarge', description: 'The body is larger than 1 MiB.' },
  { status: '415', name: 'UnsupportedMediaType', description: 'The body is not JSON.' },
  { status: '422', name: 'UnprocessableEntity', description: 'A well-formed request that breaks a business rule.' },
  { status: '429', name: 'TooManyRequests', description: 'Rate limited; retry after `Retry-After` seconds.', retryAfter: true },
  { status: '503', name: 'ServiceUnavailable', description: 'A dependency is down; retry later.' },
  { status: 'default', name: 'UnexpectedError', description: 'Any other error (a 500 is always a bug), same body.' },
];

/** Hints for well-known request fields (SPEC §2, §5, §6). */
const queryHints: Record<string, Json> = {
  limit: { minimum: 1, maximum: 100, default: 20, description: 'Page size, 1..100 (outside that range is a 400).' },
  after: { description: 'Cursor: the `next_cursor` of the previous page.' },
  days: { minimum: 1, maximum: 365, default: 30, description: 'Window in days, 1..365.' },
};

const wrapperTypes: Record<string, Json> = {
  'google.protobuf.DoubleValue': { type: 'number', format: 'double' },
  'google.protobuf.FloatValue': { type: 'number', format: 'float' },
  'google.protobuf.Int64Value': { type: 'integer', format: 'int64' },
  'google.protobuf.UInt64Value': { type: 'integer', format: 'int64', minimum: 0 },
  'google.protobuf.Int32Value': { type: 'integer', format: 'int32' },
  'google.protobuf.UInt32Value': { type: 'integer', minimum: 0, maximum: 4294967295 },
  'google.protobuf.BoolValue': { type: 'boolean' },
  'google.protobuf.StringValue': { type: 'string' },
  'google.protobuf.BytesValue': { type: 'string', contentEncoding: 'base64' },
};

const HTTP_BODY = 'google.api.HttpBody';

/** The proto3 JSON form of the well-known types (not nullable; callers add null). */
function wellKnownSchema(message: DescMessage): Json | undefined {
  const wrapper = wrapperTypes[message.typeName];
  if (wrapper) return { ...wrapper };
  switch (message.typeName) {
    case 'google.protobuf.Timestamp':
      return { type: 'string', format: 'date-time', description: 'RFC 3339, UTC.' };
    case 'google.protobuf.Duration':
      return { type: 'string', pattern: '^-?[0-9]+(\\.[0-9]{1,9})?s$', description: 'Seconds with an "s" suffix, e.g. "1.5s".' };
    case 'google.protobuf.Struct':
      return { type: 'object', additionalProperties: true };
    case 'google.protobuf.Value':
      return { description: 'Any JSON value.' };
    case 'google.protobuf.ListValue':
      return { type: 'array', items: {} };
    case 'google.protobuf.Empty':
      return { type: 'object', additionalProperties: false };
    case 'google.protobuf.FieldMask':
      return { type: 'string', description: 'Comma-separated field paths.' };
    case 'google.protobuf.Any':
      return { type: 'object', properties: { '@type': { type: 'string' } }, required: ['@type'], additionalProperties: true };
    case HTTP_BODY:
      return { type: 'string', description: 'Raw content.' };
    default:
      return undefined;
  }
}

function scalarSchema(scalar: ScalarType): Json {
  switch (scalar) {
    case ScalarType.STRING:
      return { type: 'string' };
    case ScalarType.BYTES:
      return { type: 'string', contentEncoding: 'base64' };
    case ScalarType.BOOL:
      return { type: 'boolean' };
    case ScalarType.DOUBLE:
      return { type: 'number', format: 'double' };
    case ScalarType.FLOAT:
      return { type: 'number', format: 'float' };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: 'integer', format: 'int32' };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: 'integer', minimum: 0, maximum: 4294967295 };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { type: 'integer', format: 'int64', minimum: 0 };
    default:
      // INT64, SINT64, SFIXED64: JSON numbers on this surface.
      return { type: 'integer', format: 'int64' };
  }
}

function enumSchema(desc: DescEnum): Json {
  if (desc.typeName === 'google.protobuf.NullValue') return { type: 'null' };
  return { type: 'string', enum: desc.values.map((v) => v.name) };
}

/** The schema that also admits null. */
function nullable(schema: Json): Json {
  if (Object.keys(schema).length === 0 || (Object.keys(schema).length === 1 && 'description' in schema)) return schema; // any
  const type = schema.type;
  if (typeof type === 'string' && !('$ref' in schema)) {
    if (type === 'null') return schema;
    const out: Json = { ...schema, type: [type, 'null'] };
    if (Array.isArray(schema.enum)) out.enum = [...(schema.enum as unknown[]), null];
    return out;
  }
  if (Array.isArray(type)) return type.includes('null') ? schema : { ...schema, type: [...type, 'null'] };
  return { anyOf: [schema, { type: 'null' }] };
}

/** A field with explicit presence: proto3 `optional`, or a member of a oneof. */
function hasExplicitPresence(field: DescField): boolean {
  return (field.fieldKind === 'scalar' || field.fieldKind === 'enum') && (field.proto.proto3Optional || field.oneof !== undefined);
}

function omitIfUnset(field: DescField): boolean {
  return hasOption(field, fieldRule) && getOption(field, fieldRule).omitIfUnset;
}

type Mode = 'output' | 'input';

/** Builds components.schemas: one schema per proto message (and mode) used. */
class Schemas {
  readonly components = new Map<string, Json>();
  private readonly names = new Map<string, string>();

  /** A $ref to the schema of a message as a request body (path-bound fields left out). */
  input(message: DescMessage, excluded: string[]): Json {
    return this.ref(message, 'input', excluded);
  }

  /** The schema of a message-typed value: well-known types inline, others by reference. */
  message(message: DescMessage, mode: Mode): Json {
    return wellKnownSchema(message) ?? this.ref(message, mode, []);
  }

  private ref(message: DescMessage, mode: Mode, excluded: string[]): Json {
    const known = wellKnownSchema(message);
    if (known) return known;
    const key = `${message.typeName}|${mode}|${[...excluded].sort().join(',')}`;
    let name = this.names.get(key);
    if (!name) {
      name = this.freeName(message.typeName, mode);
      this.names.set(key, name);
      this.components.set(name, {}); // placeholder: recursive messages refer to it
      this.components.set(name, this.build(message, mode, new Set(excluded)));
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  /** Output schemas take the type name (they are built first); other variants get a suffix. */
  private freeName(typeName: string, mode: Mode): string {
    if (!this.components.has(typeName)) return typeName;
    const suffix = mode === 'input' ? 'Input' : 'Output';
    for (let i = 1; ; i++) {
      const candidate = `${typeName}.${suffix}${i === 1 ? '' : i}`;
      if (!this.components.has(candidate)) return candidate;
    }
  }

  private build(message: DescMessage, mode: Mode, excluded: Set<string>): Json {
    const properties: Record<string, Json> = {};
    const required: string[] = [];
    for (const field of message.fields) {
      if (excluded.has(field.name)) continue;
      properties[field.name] = this.field(field, mode);
      if (mode === 'output' && !omitIfUnset(field)) required.push(field.name);
    }
    const schema: Json = { type: 'object', title: message.name, properties };
    if (required.length > 0) schema.required = required;
    return schema;
  }

  /** The schema of one field's JSON value. */
  field(field: DescField, mode: Mode): Json {
    // In responses, unset fields are null, except omit_if_unset ones, which are absent. In
    // requests a field is simply left out (the gateway reads null as absent, never as "clear").
    const mayBeNull = mode === 'output' && !omitIfUnset(field);
    let schema: Json;
    switch (field.fieldKind) {
      case 'scalar':
        schema = withHints(field, scalarSchema(field.scalar));
        return hasExplicitPresence(field) && mayBeNull ? nullable(schema) : schema;
      case 'enum':
        schema = enumSchema(field.enum);
        return hasExplicitPresence(field) && mayBeNull ? nullable(schema) : schema;
      case 'message':
        schema = withHints(field, this.message(field.message, mode));
        // An unset Struct is written as {} (never null); other unset messages as null.
        if (mode === 'output' && field.message.typeName === 'google.protobuf.Struct') return schema;
        return mayBeNull ? nullable(schema) : schema;
      case 'list': {
        const items =
          field.listKind === 'scalar' ? scalarSchema(field.scalar) : field.listKind === 'enum' ? enumSchema(field.enum) : this.message(field.message, mode);
        return { type: 'array', items };
      }
      case 'map': {
        const values =
          field.mapKind === 'scalar' ? scalarSchema(field.scalar) : field.mapKind === 'enum' ? enumSchema(field.enum) : this.message(field.message, mode);
        return { type: 'object', additionalProperties: values };
      }
    }
  }

  /** components.schemas, sorted by name, with the shared error body. */
  sorted(): Record<string, Json> {
    const all = new Map(this.components);
    all.set(ERROR_SCHEMA, errorSchema());
    return Object.fromEntries([...all.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }
}

/**
 * Money is a decimal string on this surface; amounts typed google.protobuf.Value on input
 * accept a JSON number or a decimal string (SPEC §2).
 */
function withHints(field: DescField, schema: Json): Json {
  if (!/_usd$/.test(field.name)) return schema;
  if (field.fieldKind === 'scalar' && field.scalar === ScalarType.STRING) return { ...schema, description: 'Decimal string (USD), e.g. "12.50".' };
  if (field.fieldKind === 'message' && field.message.typeName === 'google.protobuf.Value') {
    return { type: ['number', 'string'], description: 'Amount in USD: a JSON number or a decimal string, e.g. 12.5 or "12.50".' };
  }
  return schema;
}

function errorSchema(): Json {
  return {
    type: 'object',
    title: 'Error',
    description: 'The body of every non-2xx response.',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message', 'field', 'request_id'],
        properties: {
          code: { type: 'string', pattern: '^[a-z][a-z0-9_]*$', description: 'Machine-readable snake_case code, e.g. `invalid_credentials`.' },
          message: { type: 'string', description: 'A sentence for a person.' },
          field: { type: ['string', 'null'], description: 'The input path the error is about, or null.' },
          request_id: { type: 'string', description: 'Same as the `X-Request-Id` response header.' },
          metadata: { type: 'object', additionalProperties: true, description: 'Extra facts for the client, when the error has any.' },
        },
      },
    },
  };
}

function credentialsLabel(credentials: Credentials): string {
  switch (credentials) {
    case 'none':
      return 'No credentials.';
    case 'user_session':
      return 'A user access token (an API key gets 403 `user_session_required`).';
    default:
      return 'A user access token or an API key.';
  }
}

function securityOf(credentials: Credentials): Array<Record<string, string[]>> {
  switch (credentials) {
    case 'none':
      return [];
    case 'user_session':
      return [{ bearerAuth: [] }];
    default:
      return [{ bearerAuth: [] }, { apiKey: [] }];
  }
}

/** "owner or admin", "owner, admin or developer". */
const either = (names: readonly string[]) => (names.length > 1 ? `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}` : names.join(''));

/** One row of the permission table, in words: who may do it. */
function whoMay(action: Action): string {
  const row: Permission = permissions[action];
  const own = row.ownRoles ? `; also the ${either(row.ownRoles.filter((r) => !row.roles.includes(r)))} who created the object` : '';
  return `${either(row.roles)} may ${row.describes}${own}`;
}

/** The rule of a route in one line for the description, from its proto access option. */
function accessLine(rule: RpcRule): string {
  switch (rule.kind) {
    case 'public':
      return 'Access: public.';
    case 'account':
      return "Access: any member role; it acts on the caller's own account or memberships.";
    case 'workspace':
      return `Access: in the workspace of the request, the ${whoMay(rule.action)}.`;
    case 'handler':
      return `Access: decided on the object (another workspace's object is a 404): ${rule.actions.map((action) => `the ${whoMay(action)}`).join('; ')}.`;
    default:
      return 'Access: internal.';
  }
}

/** The machine-readable form of a route's rule: the `x-switchboard-access` extension. */
function accessExtension(route: Route): Json {
  const { rule } = route;
  const actions = rule.kind === 'workspace' ? [rule.action] : rule.kind === 'handler' ? rule.actions : [];
  return {
    rule: rule.kind,
    credentials: route.credentials,
    ...(actions.length > 0
      ? {
          actions: actions.map((action) => {
            const row: Permission = permissions[action];
            return { action, describes: row.describes, roles: [...row.roles], ...(row.ownRoles ? { roles_on_own_objects: [...row.ownRoles] } : {}) };
          }),
        }
      : {}),
  };
}

/** The role × action table of SPEC §3, for the document's introduction. */
function permissionTable(): string[] {
  const rows = (Object.keys(permissions) as Action[]).map((action) => {
    const row: Permission = permissions[action];
    const cells = roles.map((role) => (row.roles.includes(role) ? 'yes' : row.ownRoles?.includes(role) ? 'own' : 'no'));
    return `| \`${action}\` | ${row.describes} | ${cells.join(' | ')} |`;
  });
  return [`| action | what | ${roles.join(' | ')} |`, `|---|---|${roles.map(() => '---').join('|')}|`, ...rows];
}

/** stripe_signature → Stripe-Signature. */
function headerName(fieldName: string): string {
  return fieldName
    .split('_')
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('-');
}

/** A path, query or header parameter's schema, or undefined when the field cannot travel there. */
function parameterSchema(field: DescField): Json | undefined {
  switch (field.fieldKind) {
    case 'scalar':
      return { ...scalarSchema(field.scalar), ...(queryHints[field.name] ?? {}) };
    case 'enum':
      return enumSchema(field.enum);
    case 'list':
      if (field.listKind === 'scalar') return { type: 'array', items: scalarSchema(field.scalar) };
      if (field.listKind === 'enum') return { type: 'array', items: enumSchema(field.enum) };
      return undefined;
    default:
      // Messages (well-known types included) cannot be given in a query string.
      return undefined;
  }
}

/** Builds the OpenAPI 3.1 document of the given routes (the canonical /v1 templates). */
export function buildOpenApiDocument(routes: Route[], info: OpenApiInfo = {}): Json {
  const schemas = new Schemas();
  // Responses first, so messages used in both directions keep their plain name for the output form.
  for (const route of routes) responseOf(route, schemas);

  const paths: Record<string, Record<string, Json>> = {};
  const tags = new Map<string, Json>();
  const aliased = new Set<string>();
  for (const route of routes) {
    const service = route.method.parent;
    const tag = service.name.replace(/Service$/, '') || service.name;
    if (!tags.has(tag)) tags.set(tag, { name: tag, description: `${service.typeName}, served by the ${route.owner} service.` });
    if (unversionedAlias(route)) aliased.add(`/${(route.segments[1] as { literal: string }).literal}`);

    paths[route.template] ??= {};
    const item = paths[route.template];
    const verb = route.httpMethod.toLowerCase();
    if (item[verb]) throw new Error(`OpenAPI: two routes for ${route.httpMethod} ${route.template}`);
    item[verb] = operationOf(route, tag, schemas);
  }

  const groups = [...aliased].sort();
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
    components: {
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: 'A user access token (15 minutes) from `POST /v1/auth/login`, `/v1/auth/login/2fa`, `/v1/auth/register` or `/v1/auth/refresh`.',
        },
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          description: 'An API key `sb_…` from `POST /v1/keys`; it acts as the user who created it, inside its own workspace.',
        },
      },
      schemas: schemas.sorted(),
      responses: Object.fromEntries(
        errorResponses.map((e) => [
          e.name,
          {
            description: e.description,
            headers: {
              'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' },
              ...(e.retryAfter ? { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : {}),
            },
            content: { 'application/json': { schema: { $ref: ERROR_REF } } },
          },
        ]),
      ),
      parameters: {
        WorkspaceId: {
          name: 'X-Workspace-Id',
          in: 'header',
          required: false,
          description:
            'The workspace (organization id) a user request acts in; the caller must be a member. Default: the personal workspace. An API key always acts in its own workspace (another id is a 403).',
          schema: { type: 'string' },
        },
      },
      headers: {
        'X-Request-Id': {
          description: 'The request id (taken from the request when sent, else new); also in error bodies.',
          schema: { type: 'string' },
        },
        'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 } },
      },
    },
  };
}

function describeApi(aliasedGroups: string[]): string {
  return [
    'The management plane of Switchboard: accounts, organizations, API keys with monthly spend caps, prepaid billing, conversations, feedback and signed webhooks. Generated from the protobuf definitions the gateway serves.',
    '',
    `**Versions.** Canonical paths start with \`/v1\` and are the only ones listed here. Every group except webhooks also answers without the \`/v1\` prefix, with the same handlers (${aliasedGroups.map((g) => `\`${g}\``).join(', ')}); webhook paths exist only under \`/v1\`.`,
    '',
    '**Authentication.** `Authorization: Bearer <access token>` (a JWT from login) or `Authorization: Bearer <API key>` (`sb_…`), as each operation says. A user request acts in the workspace named by `X-Workspace-Id`, else in the personal workspace.',
    '',
    '**JSON.** Requests and responses use snake_case proto field names; unknown request fields are ignored; wrong types are a 400 naming the field. In responses every field is present: unset values are `null`, empty lists `[]`, empty maps `{}` (fields that are only sometimes sent, such as secrets shown once, are left out instead). Timestamps are RFC 3339 UTC strings; money is a decimal string such as `"12.50"`.',
    '',
    '**Lists.** `?limit=` (1..100, default 20) and `?after=<cursor>`; the result is `{"data": [...], "has_more": bool, "next_cursor": string|null}`.',
    '',
    '**Errors.** Every non-2xx response has the body `{"error": {"code", "message", "field", "request_id", "metadata"?}}` and every response the `X-Request-Id` header. Sign-in calls answer 401 `invalid_credentials` or `invalid_code` on a wrong password or code. Bodies over 1 MiB are a 413.',
    '',
    '**Permissions.** Each operation says who may call it (a line in its description and the `x-switchboard-access` extension: the rule, the credentials, and the actions with the roles allowed). Roles per action (`own`: only on objects the caller created):',
    '',
    ...permissionTable(),
    '',
    'This document is served at `GET /v1/openapi.json` and rendered at `GET /docs`.',
  ].join('\n');
}

function responseOf(route: Route, schemas: Schemas): { contentType: string; schema: Json } | undefined {
  if (route.successStatus === 204) return undefined;
  const output = route.method.output;
  if (route.responseBody) {
    const field = output.fields.find((f) => f.name === route.responseBody);
    if (!field) throw new Error(`${route.method.toString()}: response_body ${route.responseBody} is not a field of ${output.typeName}`);
    if (field.fieldKind === 'message' && field.message.typeName === HTTP_BODY) return { contentType: 'text/html', schema: { type: 'string' } };
    return { contentType: 'application/json', schema: schemas.field(field, 'output') };
  }
  if (output.typeName === HTTP_BODY) return { contentType: 'text/html', schema: { type: 'string' } };
  return { contentType: 'application/json', schema: schemas.message(output, 'output') };
}

function operationOf(route: Route, tag: string, schemas: Schemas): Json {
  const input = route.method.input;
  const pathFields = route.segments.flatMap((s) => ('field' in s ? [s.field] : []));
  const pathNames = new Set(pathFields.map((f) => f.name));
  const parameters: Json[] = pathFields.map((f) => ({
    name: f.name,
    in: 'path',
    required: true,
    schema: parameterSchema(f) ?? { type: 'string' },
  }));

  let requestBody: Json | undefined;
  const nonPath = input.fields.filter((f) => !pathNames.has(f.name));
  let queryFields = nonPath;
  if (route.body === '*') {
    requestBody = {
      required: nonPath.length > 0,
      content: { 'application/json': { schema: schemas.input(input, [...pathNames]) } },
    };
    queryFields = nonPath.filter(readsFromQuery);
  } else {
    if (route.body) {
      const bodyField = input.fields.find((f) => f.name === route.body);
      if (!bodyField) throw new Error(`${route.method.toString()}: body ${route.body} is not a field of ${input.typeName}`);
      queryFields = nonPath.filter((f) => f !== bodyField);
      if (bodyField.fieldKind === 'message' && bodyField.message.typeName === HTTP_BODY) {
        // A raw body (e.g. a provider's signed webhook): passed on byte for byte; the other
        // fields come from the request headers of the same name.
        requestBody = {
          required: true,
          description: 'The raw request body, passed on byte for byte.',
          content: { 'application/json': { schema: {} } },
        };
        for (const f of queryFields) {
          parameters.push({ name: headerName(f.name), in: 'header', required: true, schema: parameterSchema(f) ?? { type: 'string' } });
        }
        queryFields = [];
      } else {
        requestBody = { required: true, content: { 'application/json': { schema: schemas.field(bodyField, 'input') } } };
      }
    }
  }
  for (const f of queryFields) {
    const schema = parameterSchema(f);
    if (!schema) continue; // not representable in a query string
    const { description, ...paramSchema } = schema;
    parameters.push({
      name: f.name,
      in: 'query',
      required: false,
      ...(typeof description === 'string' ? { description } : {}),
      ...(schema.type === 'array' ? { style: 'form', explode: true } : {}),
      schema: paramSchema,
    });
  }
  if (route.credentials !== 'none' && !pathNames.has('workspace_id')) parameters.push({ $ref: '#/components/parameters/WorkspaceId' });

  const status = String(route.successStatus);
  const success: Json = {
    description: STATUS_CODES[route.successStatus] ?? 'Success',
    headers: { 'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' } },
  };
  const response = responseOf(route, schemas);
  if (response) success.content = { [response.contentType]: { schema: response.schema } };

  const responses: Record<string, Json> = { [status]: success };
  for (const e of errorResponses) {
    if (relevant(e.status, route, pathNames.size > 0)) responses[e.status] = { $ref: `#/components/responses/${e.name}` };
  }

  const rpc = `${route.method.parent.typeName}/${route.method.name}`;
  const operation: Json = {
    tags: [tag],
    summary: route.summary || route.method.name,
    description: `Credentials: ${credentialsLabel(route.credentials)}\n\n${accessLine(route.rule)}\n\nRPC: \`${rpc}\`.`,
    operationId: `${route.method.parent.name}_${route.method.name}`,
    security: securityOf(route.credentials),
    'x-switchboard-access': accessExtension(route),
  };
  if (parameters.length > 0) operation.parameters = parameters;
  if (requestBody) operation.requestBody = requestBody;
  operation.responses = responses;
  return operation;
}

/** A route whose body is passed on raw (a google.api.HttpBody field), whatever its type. */
function rawBody(route: Route): boolean {
  const field = route.body && route.body !== '*' ? route.method.input.fields.find((f) => f.name === route.body) : undefined;
  return field?.fieldKind === 'message' && field.message.typeName === HTTP_BODY;
}

/** Which shared error responses a route lists (generic, not per route). */
function relevant(status: string, route: Route, hasPathVariables: boolean): boolean {
  const authenticated = route.credentials !== 'none';
  const mutating = route.httpMethod !== 'GET';
  switch (status) {
    case '401':
    case '403':
      return authenticated;
    case '402':
      return route.credentials === 'user_session_or_api_key';
    case '404':
      return authenticated || hasPathVariables;
    case '409':
    case '422':
      return mutating;
    case '413':
      return route.body !== '';
    case '415':
      return route.body !== '' && !rawBody(route);
    default:
      return true;
  }
}
