import { STATUS_CODES } from 'node:http';
import { getOption, hasOption } from '@bufbuild/protobuf';
import { rest } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { type CataloguedError, type CataloguedErrorOf, errorCatalogue } from '@switchboard/runtime/error-catalogue';
import { openAiErrorType, openAiErrorTypes } from '@switchboard/runtime/openai-error-type';
import type { Route } from '../routes.js';
import { HTTP_BODY, type Json } from './json-schema.js';

/**
 * The error responses of an operation: the errors the gateway or the runtime answer for every
 * route of its shape, read from the error catalogue, and those its proto declares
 * (RestRule.errors), each with an example body.
 */

export const ERROR_SCHEMA = 'Error';
export const FRONT_DOOR_ERROR_SCHEMA = 'FrontDoorError';

/** One error an operation answers with: the status, the `error.code` and when it happens. */
export interface ErrorCase {
  status: number;
  code: string;
  when: string;
  /** The `field` of the example body. */
  field?: string;
  /** The `metadata` of the example body. */
  metadata?: Json;
  /** The example's name in the response, where two cases share a code (default: the code). */
  key?: string;
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
  502: 'The upstream model API failed.',
  503: 'A dependency is down or busy; retry later.',
};

/** Errors of the catalogue, as the document describes them. */
export const fromCatalogue = (...entries: (CataloguedError | CataloguedErrorOf<never>)[]): ErrorCase[] =>
  entries.map((e) => ({ status: e.status, code: e.code, when: e.when, ...(e.exampleMetadata ? { metadata: e.exampleMetadata } : {}) }));

/**
 * The gateway's answers of the REST rate limits and of the Idempotency-Key header
 * (docs/conventions.md#rate-limits, #idempotency): the catalogue's, with the cases the document
 * tells apart by field or dependency.
 */
const edgeErrors = {
  rateLimited: fromCatalogue(errorCatalogue.rateLimited)[0],
  // A malformed header is an input error like any other, named by `field`.
  invalidIdempotencyKey: {
    ...fromCatalogue(errorCatalogue.invalidRequest)[0],
    key: 'invalid_idempotency_key',
    when: 'The `Idempotency-Key` header is empty, longer than 255 characters, or not printable ASCII (`field` is `Idempotency-Key`).',
    field: 'Idempotency-Key',
  },
  idempotencyKeyReused: { ...fromCatalogue(errorCatalogue.idempotencyKeyReused)[0], field: 'Idempotency-Key' },
  idempotentResultUnavailable: fromCatalogue(errorCatalogue.idempotentResultUnavailable)[0],
  // The catalogue's service_unavailable, in the case of the Idempotency-Key store.
  idempotencyUnavailable: {
    ...fromCatalogue(errorCatalogue.serviceUnavailable)[0],
    key: 'idempotency_unavailable',
    when: 'The store of `Idempotency-Key` answers (NATS) is unavailable: a request with the header is never run unprotected; retry shortly.',
  },
} satisfies Record<string, ErrorCase>;

/**
 * The errors the gateway answers by itself, or the runtime for every service, derived from the
 * route's shape; the protos declare only what their handlers add (RestRule.errors).
 */
function derivedErrors(route: Route): ErrorCase[] {
  const errors: ErrorCase[] = fromCatalogue(errorCatalogue.invalidRequest);
  if (route.body !== '' && !rawBody(route)) {
    errors.push(...fromCatalogue(errorCatalogue.invalidJson, errorCatalogue.unsupportedMediaType));
  }
  if (route.body !== '') errors.push(...fromCatalogue(errorCatalogue.payloadTooLarge));
  if (route.credentials !== 'none') {
    errors.push(
      ...fromCatalogue(
        errorCatalogue.unauthenticated,
        errorCatalogue.invalidToken,
        errorCatalogue.tokenExpired,
        errorCatalogue.sessionRevoked,
        errorCatalogue.accountDeactivated,
      ),
      // An API key is checked before the route's kind of credential: also where it is then refused (user_session_required).
      ...fromCatalogue(errorCatalogue.invalidApiKey, errorCatalogue.apiKeyRevoked, errorCatalogue.apiKeyExpired, errorCatalogue.spendCapExceeded),
    );
  }
  if (route.credentials === 'user_session') {
    errors.push(...fromCatalogue(errorCatalogue.userSessionRequired));
  }
  // docs/api/keys.md#scopes: every route an API key may call needs one of its scopes, and a call that
  // grants scopes (a key's `scopes`) may grant only the caller key's own.
  if (route.credentials === 'user_session_or_api_key') {
    const grants = route.method.input.fields.some((f) => f.name === 'scopes');
    errors.push({
      status: errorCatalogue.insufficientScope.status,
      code: errorCatalogue.insufficientScope.code,
      when: `The API key lacks the \`${route.scope}\` scope this operation needs${route.acceptedScopes
        .slice(1)
        .map((scope) => ` (or \`${scope}\`)`)
        .join('')}${grants ? ', or `scopes` names one it lacks itself' : ''} (\`metadata.required_scope\`).`,
      metadata: { required_scope: route.scope },
    });
  }
  if (route.rule.kind === 'workspace' || route.rule.kind === 'handler') {
    errors.push(...fromCatalogue(errorCatalogue.forbidden));
  }
  const pathFields = route.segments.flatMap((s) => ('field' in s ? [s.field.name] : []));
  if (route.credentials !== 'none' && !pathFields.includes('workspace_id')) {
    errors.push(...fromCatalogue(errorCatalogue.workspaceNotFound));
  }
  // An API key naming another workspace is refused on every route, a workspace in the path or not (rest.ts).
  if (route.credentials === 'user_session_or_api_key') {
    errors.push(...fromCatalogue(errorCatalogue.workspaceMismatch));
  }
  if (pathFields.includes('workspace_id')) {
    errors.push(...fromCatalogue(errorCatalogue.organizationNotFound));
  }
  // docs/conventions.md#rate-limits: every REST route counts against its caller's limit.
  errors.push(edgeErrors.rateLimited);
  // docs/conventions.md#idempotency: every POST takes an Idempotency-Key header.
  if (route.httpMethod === 'POST') {
    errors.push(edgeErrors.invalidIdempotencyKey, edgeErrors.idempotencyKeyReused, edgeErrors.idempotentResultUnavailable);
  }
  errors.push(...fromCatalogue(errorCatalogue.serviceUnavailable));
  if (route.httpMethod === 'POST') errors.push(edgeErrors.idempotencyUnavailable);
  errors.push(...fromCatalogue(errorCatalogue.internalError));
  if (route.unbuilt) errors.push({ status: 501, code: 'not_implemented', when: 'The operation is declared but not built yet.' });
  return errors;
}

/**
 * Codes whose declared case comes on top of the derived one rather than replacing it: the
 * handler's `insufficient_scope` (such as the scopes of the key a call rotates) beside the route's
 * own scope, a top-up's `idempotency_key` body field beside the `Idempotency-Key` header.
 */
const combined: ReadonlySet<string> = new Set([errorCatalogue.insufficientScope.code, edgeErrors.idempotencyKeyReused.code]);

/** The errors of a route: derived ones, then the handler's (a declared code replaces a derived one, except the combined ones). */
export function errorsOf(route: Route): ErrorCase[] {
  const derived = derivedErrors(route);
  const key = (e: ErrorCase) => `${e.status} ${e.key ?? e.code}`;
  const declared: ErrorCase[] = (hasOption(route.method, rest) ? getOption(route.method, rest).errors : []).map((e) => {
    const alsoDerived = combined.has(e.code) ? derived.find((d) => key(d) === `${e.status} ${e.code}`) : undefined;
    return {
      status: e.status,
      code: e.code,
      when: alsoDerived ? `${alsoDerived.when} Also: ${e.when}` : e.when,
      ...(alsoDerived?.metadata ? { metadata: alsoDerived.metadata } : {}),
      ...(e.status === 429 || (e.status === 503 && e.code !== errorCatalogue.serviceUnavailable.code) ? { metadata: { retry_after_seconds: 30 } } : {}),
    };
  });
  const declaredKeys = new Set(declared.map(key));
  return [...derived.filter((e) => !declaredKeys.has(key(e))), ...declared];
}

/** Which error body an operation answers with: the REST surface's, or the front door's (OpenAI's `type` and `param` added). */
export type ErrorFlavour = 'rest' | 'front-door';

/** The schema of each flavour's body, and the prefix of its shared components' names. */
const flavours: Record<ErrorFlavour, { schema: string; prefix: string }> = {
  rest: { schema: ERROR_SCHEMA, prefix: '' },
  'front-door': { schema: FRONT_DOOR_ERROR_SCHEMA, prefix: 'FrontDoor' },
};

/** Names in order, their trailing numbers as numbers (`NotFound2` before `NotFound10`). */
function byName(a: string, b: string): number {
  const [, baseA, numberA] = /^(.*?)(\d*)$/.exec(a)!;
  const [, baseB, numberB] = /^(.*?)(\d*)$/.exec(b)!;
  if (baseA !== baseB) return baseA < baseB ? -1 : 1;
  return Number(numberA || 1) - Number(numberB || 1);
}

/** "Too Many Requests" → "TooManyRequests": a component name of a status. */
const statusName = (status: number) => (STATUS_CODES[status] ?? `Status${status}`).replace(/[^A-Za-z0-9]/g, '');

/**
 * The error responses of every operation, shared: one `components/responses` entry per status
 * and set of cases (operations with the same errors reference the same response), and one
 * `components/examples` entry per example body. Names follow the order of first use, which the
 * routes fix, so the document stays deterministic.
 */
export class ErrorResponses {
  private readonly responses = new Map<string, { name: string; response: Json }>();
  private readonly examples = new Map<string, { name: string; example: Json }>();

  /** An operation's error responses by status, each a $ref to a shared response. */
  of(errors: ErrorCase[], flavour: ErrorFlavour, headers: (status: number) => Json): Record<string, Json> {
    const byStatus = new Map<number, ErrorCase[]>();
    for (const e of errors) byStatus.set(e.status, [...(byStatus.get(e.status) ?? []), e]);
    const out: Record<string, Json> = {};
    for (const status of [...byStatus.keys()].sort((a, b) => a - b)) {
      const response = this.response(status, byStatus.get(status)!, flavour, headers(status));
      out[status === 500 ? 'default' : String(status)] = { $ref: `#/components/responses/${response}` };
    }
    return out;
  }

  /** components.responses and components.examples, sorted by name. */
  components(): { responses: Record<string, Json>; examples: Record<string, Json> } {
    const sorted = <T>(entries: Array<{ name: string } & T>, pick: (e: T) => Json) =>
      Object.fromEntries(entries.map((e) => [e.name, pick(e)] as const).sort(([a], [b]) => byName(a, b)));
    return {
      responses: sorted([...this.responses.values()], (e) => e.response),
      examples: sorted([...this.examples.values()], (e) => e.example),
    };
  }

  private response(status: number, cases: ErrorCase[], flavour: ErrorFlavour, headers: Json): string {
    const { schema, prefix } = flavours[flavour];
    const examples: Record<string, Json> = {};
    for (const e of cases) examples[e.key ?? e.code] = { $ref: `#/components/examples/${this.example(status, e, flavour)}` };
    const response: Json = {
      description: [statusMeanings[status] ?? STATUS_CODES[status] ?? 'Error', '', ...cases.map((e) => `- \`${e.code}\`: ${e.when}`)].join('\n'),
      headers,
      content: { 'application/json': { schema: { $ref: `#/components/schemas/${schema}` }, examples } },
    };
    return this.named(this.responses, response, `${prefix}${statusName(status)}`, (name) => ({ name, response }));
  }

  private example(status: number, e: ErrorCase, flavour: ErrorFlavour): string {
    const error: Json = {
      code: e.code,
      message: e.when,
      field: e.field ?? null,
      request_id: 'req_4fNq8XbT2cLw9RkV3mZp7a',
      ...(e.metadata ? { metadata: e.metadata } : {}),
      ...(flavour === 'front-door' ? { type: openAiErrorType(status), param: e.field ?? null } : {}),
    };
    const example: Json = { summary: e.when, value: { error } };
    return this.named(this.examples, example, `${flavours[flavour].prefix}${e.key ?? e.code}`, (name) => ({ name, example }));
  }

  /** The name of a shared component: the one already made for the same content, else a new one (`name`, `name2`, …). */
  private named<T extends { name: string }>(registry: Map<string, T>, content: Json, base: string, make: (name: string) => T): string {
    const key = `${base}|${JSON.stringify(content)}`;
    const known = registry.get(key);
    if (known) return known.name;
    const taken = new Set([...registry.values()].map((v) => v.name));
    let name = base;
    for (let i = 2; taken.has(name); i++) name = `${base}${i}`;
    registry.set(key, make(name));
    return name;
  }
}

export function errorSchema(): Json {
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

/** A route whose body is passed on raw (a google.api.HttpBody field), whatever its type. */
function rawBody(route: Route): boolean {
  const field = route.body && route.body !== '*' ? route.method.input.fields.find((f) => f.name === route.body) : undefined;
  return field?.fieldKind === 'message' && field.message.typeName === HTTP_BODY;
}

/** The front door's error body: the REST body plus OpenAI's `type` and `param` (docs/api/front-door.md#errors). */
export function frontDoorErrorSchema(): Json {
  const rest = errorSchema() as { properties: { error: { required: string[]; properties: Json } } };
  return {
    type: 'object',
    title: 'FrontDoorError',
    description: 'The body of every non-2xx answer of the OpenAI-compatible routes, so OpenAI SDKs raise their typed errors.',
    required: ['error'],
    properties: {
      error: {
        ...rest.properties.error,
        required: [...rest.properties.error.required, 'type', 'param'],
        properties: {
          ...rest.properties.error.properties,
          type: {
            type: 'string',
            enum: [...openAiErrorTypes],
            description: "OpenAI's error type, by status.",
          },
          param: { type: ['string', 'null'], description: "The same as `field` (OpenAI's name for it)." },
        },
      },
    },
  };
}
