import { STATUS_CODES } from 'node:http';
import { type DescEnum, type DescField, type DescMessage, type DescService, getOption, hasOption, ScalarType } from '@bufbuild/protobuf';
import { comments } from '@switchboard/contracts/comments';
import { FieldBehavior, field_behavior as fieldBehavior } from '@switchboard/contracts/google/api/field_behavior_pb';
import { field as fieldRule, message as messageRule, rest } from '@switchboard/contracts/switchboard/api/v1/options_pb';
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
 *   `(switchboard.api.v1.field).omit_if_unset`, which are left out when unset, and those
 *   marked `always_set`, which the handler never leaves unset (not nullable); 64-bit
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

/** One error an operation answers with: the status, the `error.code` and when it happens. */
interface ErrorCase {
  status: number;
  code: string;
  when: string;
  /** The `field` of the example body. */
  field?: string;
  /** The `metadata` of the example body. */
  metadata?: Json;
}

/** What each status means on this surface (the response's description, before its codes). */
const statusMeanings: Record<number, string> = {
  400: 'Invalid input; `field` names it.',
  401: 'No credentials, or bad, expired or revoked ones.',
  402: 'Payment required.',
  403: 'Authenticated but not allowed.',
  404: "Not found, or not visible to the caller (another workspace's objects are 404, never 403).",
  409: 'Conflicts with the current state.',
  413: 'The body is too large.',
  415: 'The body is not JSON.',
  422: 'A well-formed request that breaks a business rule.',
  429: 'Too many requests; retry after `Retry-After` seconds.',
  500: 'An unexpected error (always a bug); it has been logged.',
  501: 'Not built yet.',
  503: 'A dependency is down or busy; retry later.',
};

/**
 * The errors the gateway answers by itself, or the runtime for every service, derived from the
 * route's shape; the protos declare only what their handlers add (RestRule.errors).
 */
function derivedErrors(route: Route): ErrorCase[] {
  const errors: ErrorCase[] = [
    { status: 400, code: 'invalid_request', when: 'A parameter or body field is malformed or of the wrong type (`field` names it).' },
  ];
  if (route.body !== '' && !rawBody(route)) {
    errors.push(
      { status: 400, code: 'invalid_json', when: 'The body is not valid JSON.' },
      { status: 415, code: 'unsupported_media_type', when: 'The body is not sent as `application/json`.' },
    );
  }
  if (route.body !== '') errors.push({ status: 413, code: 'payload_too_large', when: 'The body is larger than 1 MiB.' });
  if (route.credentials !== 'none') {
    errors.push(
      { status: 401, code: 'unauthenticated', when: 'No `Authorization: Bearer` header, or a malformed one.' },
      { status: 401, code: 'invalid_token', when: 'The access token is not valid.' },
      { status: 401, code: 'token_expired', when: 'The access token has expired; refresh the session.' },
      { status: 401, code: 'session_revoked', when: 'The session of the access token has ended.' },
      { status: 401, code: 'account_deactivated', when: 'The account is deactivated.' },
      // An API key is checked before the route's kind of credential: also where it is then refused (user_session_required).
      { status: 401, code: 'invalid_api_key', when: 'The API key is not valid.' },
      { status: 401, code: 'api_key_revoked', when: 'The API key has been revoked.' },
      {
        status: 402,
        code: 'spend_cap_exceeded',
        when: 'The API key reached its monthly spend cap; raise or clear the cap, or wait for `resets_at`.',
        metadata: { scope: 'key', cap_usd: '50.00', spend_usd: '50.02', resets_at: '2026-12-01T00:00:00Z' },
      },
    );
  }
  if (route.credentials === 'user_session') {
    errors.push({ status: 403, code: 'user_session_required', when: 'Called with an API key; this needs a signed-in user.' });
  }
  if (route.rule.kind === 'workspace' || route.rule.kind === 'handler') {
    errors.push({ status: 403, code: 'forbidden', when: "The caller's role in the workspace does not allow this." });
  }
  const pathFields = route.segments.flatMap((s) => ('field' in s ? [s.field.name] : []));
  if (route.credentials !== 'none' && !pathFields.includes('workspace_id')) {
    errors.push({ status: 404, code: 'workspace_not_found', when: 'The `X-Workspace-Id` names no workspace the caller is a member of.' });
  }
  // An API key naming another workspace is refused on every route, a workspace in the path or not (rest.ts).
  if (route.credentials === 'user_session_or_api_key') {
    errors.push({ status: 403, code: 'workspace_mismatch', when: "An API key was sent with another workspace's `X-Workspace-Id`." });
  }
  if (pathFields.includes('workspace_id')) {
    errors.push({ status: 404, code: 'organization_not_found', when: 'No such workspace, or the caller is not a member of it.' });
  }
  errors.push(
    { status: 503, code: 'service_unavailable', when: 'A service this request needs is unavailable; retry shortly.' },
    { status: 500, code: 'internal_error', when: 'An unexpected error; it has been logged with the request id.' },
  );
  if (route.unbuilt) errors.push({ status: 501, code: 'not_implemented', when: 'The operation is declared but not built yet.' });
  return errors;
}

/** The errors of a route: derived ones, then the handler's (a declared code replaces a derived one). */
function errorsOf(route: Route): ErrorCase[] {
  const declared: ErrorCase[] = (hasOption(route.method, rest) ? getOption(route.method, rest).errors : []).map((e) => ({
    status: e.status,
    code: e.code,
    when: e.when,
    ...(e.status === 429 || (e.status === 503 && e.code !== 'service_unavailable') ? { metadata: { retry_after_seconds: 30 } } : {}),
  }));
  const key = (e: ErrorCase) => `${e.status} ${e.code}`;
  const declaredKeys = new Set(declared.map(key));
  return [...derivedErrors(route).filter((e) => !declaredKeys.has(key(e))), ...declared];
}

/** The responses of a route's errors, one per status, with an example body per code. */
function errorResponsesOf(errors: ErrorCase[]): Record<string, Json> {
  const byStatus = new Map<number, ErrorCase[]>();
  for (const e of errors) byStatus.set(e.status, [...(byStatus.get(e.status) ?? []), e]);
  const out: Record<string, Json> = {};
  for (const status of [...byStatus.keys()].sort((a, b) => a - b)) {
    const cases = byStatus.get(status)!;
    out[status === 500 ? 'default' : String(status)] = {
      description: [statusMeanings[status] ?? STATUS_CODES[status] ?? 'Error', '', ...cases.map((e) => `- \`${e.code}\`: ${e.when}`)].join('\n'),
      headers: {
        'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' },
        ...(status === 429 || status === 503 ? { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : {}),
      },
      content: {
        'application/json': {
          schema: { $ref: ERROR_REF },
          examples: Object.fromEntries(
            cases.map((e) => [
              e.code,
              {
                summary: e.when,
                value: {
                  error: {
                    code: e.code,
                    message: e.when,
                    field: e.field ?? null,
                    request_id: 'req_4fNq8XbT2cLw9RkV3mZp7a',
                    ...(e.metadata ? { metadata: e.metadata } : {}),
                  },
                },
              },
            ]),
          ),
        },
      },
    };
  }
  return out;
}

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

function alwaysSet(field: DescField): boolean {
  return hasOption(field, fieldRule) && getOption(field, fieldRule).alwaysSet;
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
      properties[field.name] = described(this.field(field, mode), fieldDescription(field));
      if (mode === 'output' ? !omitIfUnset(field) : isRequired(field)) required.push(field.name);
    }
    const schema: Json = { type: 'object', title: message.name };
    const description = comments[message.typeName];
    if (description) schema.description = description;
    schema.properties = properties;
    if (required.length > 0) schema.required = required;
    const example = exampleOf(message, excluded);
    if (example) schema.examples = [example];
    return schema;
  }

  /** The schema of one field's JSON value. */
  field(field: DescField, mode: Mode): Json {
    // In responses, unset fields are null, except omit_if_unset ones, which are absent, and
    // always_set ones, which never are unset. In requests a field is simply left out (the
    // gateway reads null as absent, never as "clear").
    const mayBeNull = mode === 'output' && !omitIfUnset(field) && !alwaysSet(field);
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

/** A field marked `(google.api.field_behavior) = REQUIRED`: the handler refuses a request without it. */
function isRequired(field: DescField): boolean {
  return hasOption(field, fieldBehavior) && getOption(field, fieldBehavior).includes(FieldBehavior.REQUIRED);
}

/**
 * The example of a message's JSON form, from its `(switchboard.api.v1.message).example` option,
 * without the fields bound elsewhere (path variables). A malformed example fails the build of the
 * document, so at start-up.
 */
function exampleOf(message: DescMessage, excluded: Iterable<string> = []): Json | undefined {
  if (message.typeName === 'google.protobuf.Empty') return {};
  if (!hasOption(message, messageRule)) return undefined;
  const text = getOption(message, messageRule).example;
  if (!text) return undefined;
  let example: unknown;
  try {
    example = JSON.parse(text);
  } catch (err) {
    throw new Error(`${message.typeName}: its example is not JSON (${(err as Error).message})`);
  }
  if (!example || typeof example !== 'object' || Array.isArray(example)) throw new Error(`${message.typeName}: its example is not a JSON object`);
  const out = { ...(example as Json) };
  for (const name of excluded) delete out[name];
  return out;
}

/** A field's description: its comment, and for an enum what each value means. */
function fieldDescription(field: DescField): string {
  const parts = [comments[`${field.parent.typeName}.${field.name}`] ?? ''];
  const desc = field.fieldKind === 'enum' ? field.enum : field.fieldKind === 'list' && field.listKind === 'enum' ? field.enum : undefined;
  if (desc) {
    const values = desc.values.filter((v) => v.number !== 0 || comments[`${desc.typeName}.${v.name}`]);
    const lines = values.map((v) => `- \`${v.name}\`${comments[`${desc.typeName}.${v.name}`] ? `: ${comments[`${desc.typeName}.${v.name}`]}` : ''}`);
    if (lines.length > 0) parts.push(lines.join('\n'));
  }
  return parts.filter(Boolean).join('\n\n');
}

/** A schema with a description in front of the type's own (e.g. "RFC 3339, UTC."). */
function described(schema: Json, description: string): Json {
  if (!description) return schema;
  const own = typeof schema.description === 'string' ? schema.description : '';
  return { ...schema, description: own ? `${description}\n\n${own}` : description };
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
        description: 'What went wrong.',
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
    if (!tags.has(tag)) tags.set(tag, tagOf(tag, service, route.owner));
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

function responseOf(route: Route, schemas: Schemas): { contentType: string; schema: Json; example?: Json } | undefined {
  if (route.successStatus === 204) return undefined;
  const output = route.method.output;
  if (route.responseBody) {
    const field = output.fields.find((f) => f.name === route.responseBody);
    if (!field) throw new Error(`${route.method.toString()}: response_body ${route.responseBody} is not a field of ${output.typeName}`);
    if (field.fieldKind === 'message' && field.message.typeName === HTTP_BODY) return { contentType: 'text/html', schema: { type: 'string' } };
    return {
      contentType: 'application/json',
      schema: schemas.field(field, 'output'),
      example: field.fieldKind === 'message' ? exampleOf(field.message) : undefined,
    };
  }
  if (output.typeName === HTTP_BODY) return { contentType: 'text/html', schema: { type: 'string' } };
  return { contentType: 'application/json', schema: schemas.message(output, 'output'), example: exampleOf(output) };
}

function operationOf(route: Route, tag: string, schemas: Schemas): Json {
  const input = route.method.input;
  const pathFields = route.segments.flatMap((s) => ('field' in s ? [s.field] : []));
  const pathNames = new Set(pathFields.map((f) => f.name));
  const parameters: Json[] = pathFields.map((f) => {
    const { description, ...schema } = parameterSchema(f) ?? { type: 'string' };
    return { name: f.name, in: 'path', required: true, ...describedParameter(f, description), schema };
  });

  let requestBody: Json | undefined;
  const nonPath = input.fields.filter((f) => !pathNames.has(f.name));
  let queryFields = nonPath;
  if (route.body === '*') {
    const example = exampleOf(input, pathNames);
    requestBody = {
      // Required when a field is: a body of optional fields may be left out (POST /v1/auth/logout).
      required: nonPath.some(isRequired),
      content: { 'application/json': { schema: schemas.input(input, [...pathNames]), ...(example ? { example } : {}) } },
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
          const { description, ...schema } = parameterSchema(f) ?? { type: 'string' };
          parameters.push({ name: headerName(f.name), in: 'header', required: true, ...describedParameter(f, description), schema });
        }
        queryFields = [];
      } else {
        const example = bodyField.fieldKind === 'message' ? exampleOf(bodyField.message) : undefined;
        requestBody = { required: true, content: { 'application/json': { schema: schemas.field(bodyField, 'input'), ...(example ? { example } : {}) } } };
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
      required: isRequired(f),
      ...describedParameter(f, description),
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
  if (response) success.content = { [response.contentType]: { schema: response.schema, ...(response.example ? { example: response.example } : {}) } };

  const successes: Record<string, Json> = { [status]: success };
  for (const other of route.otherSuccesses) successes[other.status] = { ...success, description: `${STATUS_CODES[other.status] ?? 'Success'}: ${other.when}` };
  const responses: Record<string, Json> = { ...successes, ...errorResponsesOf(errorsOf(route)) };

  const rpc = `${route.method.parent.typeName}/${route.method.name}`;
  const own = comments[`${route.method.parent.typeName}.${route.method.name}`] ?? '';
  const unbuilt = route.unbuilt ? '**Not built yet:** this operation answers 501 `not_implemented` until it is.\n\n' : '';
  const operation: Json = {
    tags: [tag],
    summary: `${route.unbuilt ? '(Not built yet) ' : ''}${route.summary || route.method.name}`,
    description: `${unbuilt}${own}\n\nCredentials: ${credentialsLabel(route.credentials)}\n\n${accessLine(route.rule)}`,
    operationId: `${route.method.parent.name}_${route.method.name}`,
    security: securityOf(route.credentials),
    'x-switchboard-access': accessExtension(route),
    'x-switchboard-rpc': rpc,
    ...(route.unbuilt ? { 'x-switchboard-unbuilt': true } : {}),
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

/** A parameter's description: its field's comment, else the hint of its name (limit, after…). */
function describedParameter(field: DescField, hint: unknown): { description?: string } {
  const text = comments[`${field.parent.typeName}.${field.name}`] || (typeof hint === 'string' ? hint : '');
  return text ? { description: text } : {};
}

/** A tag per service: the resource in the service's own words; the proto name for mesh callers. */
function tagOf(name: string, service: DescService, owner: string): Json {
  return {
    name,
    description: comments[service.typeName] ?? name,
    'x-switchboard-service': service.typeName,
    'x-switchboard-component': owner,
  };
}
