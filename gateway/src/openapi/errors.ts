import { STATUS_CODES } from 'node:http';
import { getOption, hasOption } from '@bufbuild/protobuf';
import { rest } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { type CataloguedError, type CataloguedErrorOf, errorCatalogue } from '@switchboard/runtime/error-catalogue';
import type { Route } from '../routes.js';
import { HTTP_BODY, type Json } from './json-schema.js';

/**
 * The error responses of an operation: the errors the gateway or the runtime answer for every
 * route of its shape, read from the error catalogue, and those its proto declares
 * (RestRule.errors), each with an example body.
 */

export const ERROR_SCHEMA = 'Error';
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

/** Errors of the catalogue, as the document describes them. */
const fromCatalogue = (...entries: (CataloguedError | CataloguedErrorOf<never>)[]): ErrorCase[] =>
  entries.map((e) => ({ status: e.status, code: e.code, when: e.when, ...(e.exampleMetadata ? { metadata: e.exampleMetadata } : {}) }));

/**
 * The errors the gateway answers by itself, or the runtime for every service, derived from the
 * route's shape; the protos declare only what their handlers add (RestRule.errors).
 */
function derivedErrors(route: Route): ErrorCase[] {
  const errors: ErrorCase[] = [
    { status: 400, code: 'invalid_request', when: 'A parameter or body field is malformed or of the wrong type (`field` names it).' },
  ];
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
      when: `The API key lacks the \`${route.scope}\` scope this operation needs${grants ? ', or `scopes` names one it lacks itself' : ''} (\`metadata.required_scope\`).`,
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
  errors.push(...fromCatalogue(errorCatalogue.serviceUnavailable, errorCatalogue.internalError));
  if (route.unbuilt) errors.push({ status: 501, code: 'not_implemented', when: 'The operation is declared but not built yet.' });
  return errors;
}

/**
 * The errors of a route: derived ones, then the handler's (a declared code replaces a derived one,
 * except `insufficient_scope`, where the handler's case, such as the scopes of the key a call
 * rotates, comes on top of the route's own scope).
 */
export function errorsOf(route: Route): ErrorCase[] {
  const derived = derivedErrors(route);
  const key = (e: ErrorCase) => `${e.status} ${e.code}`;
  const declared: ErrorCase[] = (hasOption(route.method, rest) ? getOption(route.method, rest).errors : []).map((e) => {
    const alsoDerived = e.code === errorCatalogue.insufficientScope.code ? derived.find((d) => key(d) === `${e.status} ${e.code}`) : undefined;
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

/** The responses of a route's errors, one per status, with an example body per code. */
export function errorResponsesOf(errors: ErrorCase[]): Record<string, Json> {
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
