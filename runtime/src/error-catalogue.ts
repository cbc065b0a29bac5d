import type { JsonObject } from '@bufbuild/protobuf';
import { type Timestamp, timestampDate } from '@bufbuild/protobuf/wkt';
import { KeyRefusal, KeyRefusalSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { ApiError, type ApiErrorExtras } from './api-error.js';
import type { RoutingPolicy } from './model-catalog.js';
import { noAllowedCandidateMessage } from './routing-sampler.js';
import { enumFromWire } from './wire-enum.js';

/**
 * The errors the HTTP surfaces answer by themselves (docs/conventions.md#errors): the gateway's
 * REST surface when it reads a request, checks its credentials and resolves its workspace; the
 * data plane's front door (docs/api/front-door.md) for the same checks; the runtime's policy for
 * the refusals every service shares. One entry per public `error.code`, read by the code that
 * answers it and by the OpenAPI document that describes it, so the two cannot drift.
 */
interface CatalogueEntry {
  status: number;
  code: string;
  /** When it happens, in the OpenAPI document's words. */
  when: string;
  /** The `metadata` of the OpenAPI document's example body. */
  exampleMetadata?: JsonObject;
}

/** An error whose `message` is one sentence. */
export interface CataloguedError extends CatalogueEntry {
  /** The body's `message`. */
  message: string;
  /** The front door's `message`, where it differs. */
  frontDoorMessage?: string;
}

/**
 * An error whose `message` names facts of the request (its method and path, a limit, the
 * dependency that is away): the sentence is built here, the facts come from where it is answered.
 */
export interface CataloguedErrorOf<Facts> extends CatalogueEntry {
  message: (facts: Facts) => string;
  frontDoorMessage?: (facts: Facts) => string;
}

/** The body's `message` of a 401 unauthenticated: whether an Authorization header was sent at all. */
export interface AuthorizationFacts {
  headerSent: boolean;
}

/** The data plane's own reasons to be unavailable, rather than a dependency's. */
const unavailableBecause = {
  // The last event of a stream cut by a shutdown (SIGTERM).
  shutdown: 'The data plane is shutting down; what was produced is billed. Retry the request.',
  // A routed model this replica's catalog does not hold (a catalog change in flight).
  routedModelMissing: 'The routed model is not in this data plane’s catalog; try again shortly.',
} as const;

export const errorCatalogue = {
  invalidToken: { status: 401, code: 'invalid_token', message: 'The access token is not valid.', when: 'The access token is not valid.' },
  tokenExpired: {
    status: 401,
    code: 'token_expired',
    message: 'The access token has expired; refresh the session.',
    when: 'The access token has expired; refresh the session.',
  },
  sessionRevoked: {
    status: 401,
    code: 'session_revoked',
    message: 'This session has ended; sign in again.',
    when: 'The session of the access token has ended.',
  },
  accountDeactivated: { status: 401, code: 'account_deactivated', message: 'This account is deactivated.', when: 'The account is deactivated.' },
  invalidApiKey: { status: 401, code: 'invalid_api_key', message: 'The API key is not valid.', when: 'The API key is not valid.' },
  apiKeyRevoked: { status: 401, code: 'api_key_revoked', message: 'This API key has been revoked.', when: 'The API key has been revoked.' },
  apiKeyExpired: {
    status: 401,
    code: 'api_key_expired',
    message: 'This API key has expired.',
    when: "The API key's `expires_at` has passed (a rotated key after its grace period).",
  },
  insufficientScope: {
    status: 403,
    code: 'insufficient_scope',
    message: "This API key's scopes do not allow this call (`metadata.required_scope`).",
    when: 'The API key lacks the scope the route needs (`metadata.required_scope`), or grants a scope it does not have itself.',
    exampleMetadata: { required_scope: 'manage' },
  },
  modelNotAllowed: {
    status: 403,
    code: 'model_not_allowed',
    message: 'This API key may not use this model; its `allowed_models` list which it may (GET /v1/key).',
    when: "The model is outside the API key's `allowed_models` (a service tier with none of its allowed concrete models too).",
  },
  rateLimitExceeded: {
    status: 429,
    code: 'rate_limit_exceeded',
    message: "This API key's rate limit is reached; retry after `Retry-After` seconds.",
    when: "The API key's `requests_per_minute`, `tokens_per_minute` or `max_concurrent` limit is reached (`metadata.scope` says which); retry after `Retry-After` seconds.",
    exampleMetadata: { limit: 20, scope: 'requests', reset_seconds: 42 },
  },
  spendCapExceeded: {
    status: 402,
    code: 'spend_cap_exceeded',
    message: 'This key has reached a spend limit (`metadata.period`); raise or clear it, or wait for `metadata.resets_at`.',
    // The front door asks with the request's estimate: there the request would cross the cap.
    frontDoorMessage:
      'This request would take the spend past a limit of the key or the workspace (`metadata.scope`, `metadata.period`); raise or clear it, or wait for `metadata.resets_at`.',
    when: 'A spend limit of the API key or (at the front door) of the workspace is reached (`metadata.scope`, `metadata.period`); raise or clear it, or wait for `resets_at`.',
    exampleMetadata: { scope: 'key', period: 'month', cap_usd: '50.00', spend_usd: '50.02', resets_at: '2026-12-01T00:00:00Z' },
  },
  insufficientBalance: {
    status: 402,
    code: 'insufficient_balance',
    message: "The workspace's balance is used up; top it up to continue.",
    frontDoorMessage: "The workspace's balance does not cover this request's estimate (`metadata.required_usd`); top it up, or ask for fewer tokens.",
    when: "The workspace's prepaid balance is at or below zero, or (at the front door) below the request's estimate (model requests only).",
  },
  workspaceMismatch: {
    status: 403,
    code: 'workspace_mismatch',
    message: 'An API key can only act in its own workspace.',
    when: "An API key was sent with another workspace's `X-Workspace-Id`.",
  },
  workspaceNotFound: {
    status: 404,
    code: 'workspace_not_found',
    message: 'No such workspace, or you are not a member of it.',
    when: 'The `X-Workspace-Id` names no workspace the caller is a member of.',
  },

  // Credentials missing or not of the kind the route takes.
  unauthenticated: {
    status: 401,
    code: 'unauthenticated',
    message: ({ headerSent }: AuthorizationFacts) =>
      headerSent ? 'The Authorization header must be "Bearer <token>".' : 'Authentication required: send Authorization: Bearer <access token or API key>.',
    // The front door takes API keys only, and says so whatever was sent.
    frontDoorMessage: () => 'Send an API key: Authorization: Bearer sb_….',
    when: 'No `Authorization: Bearer` header, or a malformed one.',
  },
  userSessionRequired: {
    status: 403,
    code: 'user_session_required',
    message: 'This operation needs a signed-in user session; an API key cannot perform it.',
    when: 'Called with an API key; this needs a signed-in user.',
  },
  // The runtime's policy refuses a role (runtime/src/policy.ts): the sentence names the role and the action.
  forbidden: {
    status: 403,
    code: 'forbidden',
    message: ({ who, does, roles }: { who: string; does: string; roles: string }) => `${who} cannot ${does}; this needs the ${roles} role.`,
    when: "The caller's role in the workspace does not allow this.",
  },
  // A workspace in the path (/v1/organizations/{org_id}/…) the caller cannot see: never a 403.
  organizationNotFound: {
    status: 404,
    code: 'organization_not_found',
    message: 'No such organization, or you are not a member of it.',
    when: 'No such workspace, or the caller is not a member of it.',
  },

  // The request itself: its route, its method and its body.
  routeNotFound: {
    status: 404,
    code: 'route_not_found',
    message: ({ method, path }: { method: string | undefined; path: string }) => `No route for ${method} ${path}.`,
    when: 'No route has this path.',
  },
  methodNotAllowed: {
    status: 405,
    code: 'method_not_allowed',
    // The answer also carries `Allow` with the same methods (RFC 9110 §15.5.6).
    message: ({ method, allowed }: { method: string | undefined; allowed: readonly string[] }) => `${method} is not allowed here; use ${allowed.join(', ')}.`,
    when: 'The path has routes, none for this method; `Allow` lists them.',
  },
  // What is wrong with which input, in the words of the check that found it (the field's reader).
  invalidRequest: {
    status: 400,
    code: 'invalid_request',
    message: ({ problem }: { problem: string }) => problem,
    when: 'A parameter or body field is malformed or of the wrong type (`field` names it).',
  },
  invalidJson: { status: 400, code: 'invalid_json', message: 'The request body is not valid JSON.', when: 'The body is not valid JSON.' },
  // The front door's allow-list (docs/api/front-door.md#parameters): what the price list cannot bill never goes upstream.
  unsupportedParameter: {
    status: 400,
    code: 'unsupported_parameter',
    message: ({ param }: { param: string }) =>
      `The parameter ${JSON.stringify(param)} is not supported: a chat completion takes only the parameters the platform can bill (docs/api/front-door.md#parameters).`,
    when: 'The request carries a parameter outside the front door’s allow-list; `field` names it.',
  },
  unsupportedMediaType: {
    status: 415,
    code: 'unsupported_media_type',
    message: 'Send the request body as JSON (Content-Type: application/json).',
    when: 'The body is not sent as `application/json`.',
  },
  payloadTooLarge: {
    status: 413,
    code: 'payload_too_large',
    message: ({ limitBytes }: { limitBytes: number }) => `The request body is larger than ${limitBytes} bytes.`,
    // Both surfaces read at most 1 MiB (maxBodyBytes of gateway/src/rest.ts and data-plane/src/server.ts).
    when: 'The body is larger than 1 MiB.',
  },

  // Requests Node refuses before any route is read (runtime/src/client-error.ts): no
  // operation of the OpenAPI document lists them, since none is reached.
  headersTooLarge: {
    status: 431,
    code: 'headers_too_large',
    message: 'The request headers are too large.',
    when: 'The request headers are larger than the server reads.',
  },
  requestTimeout: {
    status: 408,
    code: 'request_timeout',
    message: 'The request was not received in time.',
    when: 'The request (its headers or its body) did not arrive in time.',
  },

  // The front door's model requests: the model, its route and its upstream (docs/api/front-door.md#errors).
  modelUnavailable: {
    status: 400,
    code: 'model_unavailable',
    // The name comes from the client: the answer repeats at most 100 characters of it.
    message: ({ model }: { model: string }) => `The model ${JSON.stringify(model.slice(0, 100))} is not served here; GET /v1/models lists the models.`,
    when: 'A concrete model the catalog does not serve.',
  },
  // A service tier none of whose candidates the policy allows, or a concrete model served only outside it.
  routingPolicyViolation: {
    status: 403,
    code: 'routing_policy_violation',
    message: (facts: { policy: RoutingPolicy } & ({ tier: string } | { model: string })) =>
      'tier' in facts
        ? noAllowedCandidateMessage(facts.tier, facts.policy)
        : `The model ${facts.model} is served only in a region this key's ${facts.policy} routing policy excludes.`,
    when: "The model is served only in regions the key's routing policy excludes.",
  },
  upstreamRejected: {
    status: 400,
    code: 'upstream_rejected',
    message: ({ reason }: { reason: string }) => `The model provider refused the request: ${reason}`,
    when: "The model provider refused the request (an upstream 400 or 422); the message is the provider's.",
  },
  // Before the first byte a 502; after it, the last event of a stream the upstream ended early.
  upstreamError: {
    status: 502,
    code: 'upstream_error',
    message: (facts: { failure: string } | { streamEndedEarly: true }) =>
      'failure' in facts ? `The model provider failed: ${facts.failure}.` : 'The upstream stream ended early.',
    when: 'The upstream failed before the first byte, on the retry too (another candidate of the tier).',
  },
  // Only ever the last event of a stream (its 200 is sent): the status gives its OpenAI `type`, api_error.
  streamTooLong: {
    status: 504,
    code: 'stream_too_long',
    message: 'The stream ran past its longest duration (STREAM_MAX_DURATION) and was cut; what was produced is billed.',
    when: 'A stream ran past `STREAM_MAX_DURATION` and was cut (its last event; what was produced is billed).',
  },

  // The REST surface's own limits and its Idempotency-Key header (docs/conventions.md#rate-limits, #idempotency).
  rateLimited: {
    status: 429,
    code: 'rate_limited',
    message: 'Too many requests; retry after `Retry-After` seconds.',
    when: 'The REST rate limit of the caller (per user or API key, or per client address without credentials) is used up for this minute; retry after `Retry-After` seconds (`metadata.retry_after_seconds`).',
    exampleMetadata: { retry_after_seconds: 17 },
  },
  idempotencyKeyReused: {
    status: 422,
    code: 'idempotency_key_reused',
    message: 'This Idempotency-Key was used for another request (another path, query or body); use a new key for a new request.',
    when: 'The `Idempotency-Key` was used within 24 h by the same caller on this route for a request with another path, query or body (`field` is `Idempotency-Key`).',
  },
  idempotentResultUnavailable: {
    status: 409,
    code: 'idempotent_result_unavailable',
    // Without limitBytes: the answer was kept, but under an idempotency secret rotated since (docs/conventions.md#idempotency).
    message: ({ limitBytes }: { limitBytes?: number }) =>
      limitBytes === undefined
        ? 'The request with this Idempotency-Key was already carried out, but its kept answer can no longer be read; read the result with a GET.'
        : `The request with this Idempotency-Key was already carried out, but its answer was larger than ${limitBytes} bytes and was not kept; read the result with a GET.`,
    when: 'The request with this `Idempotency-Key` was already carried out and its answer was too large to keep for replays (or was kept before a rotation of the idempotency secret); it is not carried out again.',
  },

  // The server's side: a dependency away, or a bug.
  serviceUnavailable: {
    status: 503,
    code: 'service_unavailable',
    message: (facts: { dependency?: string } | { because: keyof typeof unavailableBecause }) =>
      'because' in facts
        ? unavailableBecause[facts.because]
        : facts.dependency
          ? `The ${facts.dependency} is unavailable; try again shortly.`
          : 'A service this request needs is unavailable; try again shortly.',
    when: 'A service this request needs is unavailable; retry shortly.',
  },
  // A 5xx never shows internals: the message a service wrote for an unexpected failure stays in its log.
  internalError: {
    status: 500,
    code: 'internal_error',
    message: 'An unexpected error occurred; it has been logged.',
    when: 'An unexpected error; it has been logged with the request id.',
  },
} as const satisfies Record<string, CataloguedError | CataloguedErrorOf<never>>;

/** Where an error is answered: the management REST surface, or the model requests' front door. */
export type Surface = 'rest' | 'front-door';

/** The answer of an error of the catalogue on `surface`. */
export function catalogued(entry: CataloguedError, options?: ApiErrorExtras, surface?: Surface): ApiError;
/** The answer of an error of the catalogue on `surface`, its message naming `facts`. */
export function catalogued<Facts>(entry: CataloguedErrorOf<Facts>, facts: Facts, options?: ApiErrorExtras, surface?: Surface): ApiError;
export function catalogued(entry: CataloguedError | CataloguedErrorOf<unknown>, ...args: unknown[]): ApiError {
  const dynamic = typeof entry.message === 'function';
  const [facts, options = {}, surface = 'rest'] = (dynamic ? args : [undefined, ...args]) as [unknown, ApiErrorExtras?, Surface?];
  return new ApiError(entry.status, entry.code, messageOf(entry, surface, facts), options);
}

/** The body's `message` of an entry on `surface` (the front door's own sentence where it has one). */
function messageOf(entry: CataloguedError | CataloguedErrorOf<unknown>, surface: Surface = 'rest', facts?: unknown): string {
  const message = (surface === 'front-door' ? entry.frontDoorMessage : undefined) ?? entry.message;
  return typeof message === 'function' ? message(facts) : message;
}

/** What AuthorizeKey and AuthenticateKey answer about a key: its refusal, with the cap's facts. */
export interface KeyAnswer {
  reason: string;
  capUsd?: string;
  spendUsd?: string;
  resetsAt?: Timestamp;
  /** Whose budget: key (the default) or workspace. */
  scope?: string;
  /** The budget's period: day, week, month (the default) or total. */
  period?: string;
}

/** The facts of a 402 spend_cap_exceeded (docs/api/keys.md): never the key itself. */
const capFacts = (answer: KeyAnswer): JsonObject => ({
  scope: answer.scope || 'key',
  period: answer.period || 'month',
  cap_usd: answer.capUsd ?? null,
  spend_usd: answer.spendUsd ?? null,
  resets_at: answer.resetsAt ? timestampDate(answer.resetsAt).toISOString() : null,
});

/** The error of each refusal, and the builder of its metadata when it has any. */
const byRefusal: Record<Exclude<KeyRefusal, KeyRefusal.UNSPECIFIED>, { error: CataloguedError; metadata?: (answer: KeyAnswer) => JsonObject }> = {
  [KeyRefusal.UNKNOWN]: { error: errorCatalogue.invalidApiKey },
  [KeyRefusal.REVOKED]: { error: errorCatalogue.apiKeyRevoked },
  [KeyRefusal.SPEND_CAP_EXCEEDED]: { error: errorCatalogue.spendCapExceeded, metadata: capFacts },
  [KeyRefusal.INSUFFICIENT_BALANCE]: { error: errorCatalogue.insufficientBalance },
  [KeyRefusal.EXPIRED]: { error: errorCatalogue.apiKeyExpired },
};

/**
 * The refusal of a key as its KeyRefusal; a reason this build does not know is an unknown key
 * (refused, never let through).
 */
export function keyRefusalOf(reason: string): KeyRefusal {
  return (enumFromWire(KeyRefusalSchema, reason) as KeyRefusal | undefined) ?? KeyRefusal.UNKNOWN;
}

/** The error a refused key is answered with (docs/api/keys.md), undefined when the key may be used. */
export function keyRefusalError(answer: KeyAnswer, surface: Surface): ApiError | undefined {
  const refusal = keyRefusalOf(answer.reason);
  if (refusal === KeyRefusal.UNSPECIFIED) return undefined;
  const { error, metadata } = byRefusal[refusal];
  return catalogued(error, metadata ? { metadata: metadata(answer) } : {}, surface);
}
