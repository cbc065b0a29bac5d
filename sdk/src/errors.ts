import type { components } from './schema.js';

/** The error body of every non-2xx answer: `{"error": {code, message, field, request_id, metadata?}}`. */
export type ErrorBody = components['schemas']['Error'];

/** The `error` object of an error body. */
export type ErrorDetail = ErrorBody['error'];

/** What every SwitchboardError is built from. */
export interface SwitchboardErrorInit {
  status: number;
  code: string;
  message: string;
  field?: string | null;
  requestId?: string | null;
  metadata?: Record<string, unknown>;
  retryAfter?: number | null;
  headers?: Headers;
  body?: unknown;
  cause?: unknown;
}

/**
 * A non-2xx answer of the API (or, for the subclasses APIConnectionError and APITimeoutError, no
 * answer at all), thrown by the client's methods. It carries the contract's error body
 * (docs/conventions.md#errors): `code` is the machine-readable snake_case code to branch on
 * (`invalid_credentials`, `spend_cap_exceeded`, …), `field` the input it is about. The subclass
 * says the status (`NotFoundError`, `RateLimitError`, …) and, for the codes a program most often
 * handles, the code (`SpendCapExceededError`, `InsufficientBalanceError`, …).
 */
export class SwitchboardError extends Error {
  override readonly name: string = 'SwitchboardError';
  /** The HTTP status, e.g. 401; 0 when no answer arrived (APIConnectionError). */
  readonly status: number;
  /** The `error.code` of the body, e.g. `invalid_credentials`; `http_<status>` when the body is not the contract's. */
  readonly code: string;
  /** The input path the error is about, or null. */
  readonly field: string | null;
  /** The request id (`error.request_id`, else the `X-Request-Id` header); quote it when reporting a problem. */
  readonly requestId: string | null;
  /** Extra facts of the error (e.g. `{scope, cap_usd, spend_usd, resets_at}` of `spend_cap_exceeded`), or {}. */
  readonly metadata: Record<string, unknown>;
  /** Seconds to wait before retrying, from the `Retry-After` header (429, 503), or null. */
  readonly retryAfter: number | null;
  /** The headers of the answer (empty when none arrived). */
  readonly headers: Headers;
  /** The error body as received (the parsed JSON, or the text when it was not JSON). */
  readonly body: unknown;

  constructor(init: SwitchboardErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.code = init.code;
    this.field = init.field ?? null;
    this.requestId = init.requestId ?? null;
    this.metadata = init.metadata ?? {};
    this.retryAfter = init.retryAfter ?? null;
    this.headers = init.headers ?? new Headers();
    this.body = init.body;
  }

  /** The error of an answer, as the subclass of its status and code: `body` is the parsed body (JSON, else text). */
  static fromResponse(response: Response, body: unknown): SwitchboardError {
    const headerRequestId = response.headers.get('x-request-id');
    const common = { status: response.status, headers: response.headers, retryAfter: parseRetryAfter(response.headers.get('retry-after')), body };
    if (isErrorBody(body)) {
      const { code, message, field, request_id: requestId, metadata } = body.error;
      return errorOf({ ...common, code, message, field: field ?? null, requestId: requestId || headerRequestId, metadata: metadata ?? {} });
    }
    const text = typeof body === 'string' ? body.trim() : '';
    return errorOf({
      ...common,
      code: `http_${response.status}`,
      message: text ? `HTTP ${response.status}: ${text.slice(0, 200)}` : `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}`,
      requestId: headerRequestId,
    });
  }
}

/** 400: invalid input (`field` names it), or a wrong or expired single-use token. */
export class BadRequestError extends SwitchboardError {
  override readonly name: string = 'BadRequestError';
}
/** 401: no or bad credentials (`token_expired` is renewed by the client itself when it holds a refresh token). */
export class AuthenticationError extends SwitchboardError {
  override readonly name: string = 'AuthenticationError';
}
/** 402: a spend limit is reached or the balance is used up; retrying does not help until that changes. */
export class PaymentRequiredError extends SwitchboardError {
  override readonly name: string = 'PaymentRequiredError';
}
/** 402 `spend_cap_exceeded`: `metadata {scope, period, cap_usd, spend_usd, resets_at}` (docs/api/keys.md). */
export class SpendCapExceededError extends PaymentRequiredError {
  override readonly name: string = 'SpendCapExceededError';
}
/** 402 `insufficient_balance`: the workspace's prepaid balance is used up; top it up (docs/api/billing.md). */
export class InsufficientBalanceError extends PaymentRequiredError {
  override readonly name: string = 'InsufficientBalanceError';
}
/** 403: authenticated, but the role, credential, scope or re-authentication does not allow it. */
export class PermissionDeniedError extends SwitchboardError {
  override readonly name: string = 'PermissionDeniedError';
}
/** 404: not found, or not visible to the caller. */
export class NotFoundError extends SwitchboardError {
  override readonly name: string = 'NotFoundError';
}
/** 409: conflict with the current state (`key_revoked`, `webhook_disabled`, …). */
export class ConflictError extends SwitchboardError {
  override readonly name: string = 'ConflictError';
}
/** 413 `payload_too_large`: the request body is larger than the surface reads (1 MiB); send less. */
export class PayloadTooLargeError extends SwitchboardError {
  override readonly name: string = 'PayloadTooLargeError';
}
/** 415 `unsupported_media_type`: the body was not sent as `application/json`. */
export class UnsupportedMediaTypeError extends SwitchboardError {
  override readonly name: string = 'UnsupportedMediaTypeError';
}
/** 422: a well-formed request that breaks a business rule. */
export class UnprocessableEntityError extends SwitchboardError {
  override readonly name: string = 'UnprocessableEntityError';
}
/**
 * 422 `idempotency_key_reused`: the `Idempotency-Key` (or a top-up's `idempotency_key`) was used
 * before with another request (docs/conventions.md#idempotency): a bug of the caller, never retried.
 */
export class IdempotencyKeyReusedError extends UnprocessableEntityError {
  override readonly name: string = 'IdempotencyKeyReusedError';
}
/** 429: throttled or rate limited (`rate_limited`, `rate_limit_exceeded`, `too_many_attempts`); `retryAfter` says when to try again. */
export class RateLimitError extends SwitchboardError {
  override readonly name: string = 'RateLimitError';
}
/** 5xx other than 503: a bug of the platform (500), or the upstream model API failed (502). */
export class InternalServerError extends SwitchboardError {
  override readonly name: string = 'InternalServerError';
}
/** 503: a dependency is down or saturated; `retryAfter` says when trying again helps. */
export class ServiceUnavailableError extends SwitchboardError {
  override readonly name: string = 'ServiceUnavailableError';
}

/** No answer arrived: the connection failed or dropped (`cause` is fetch's own error). */
export class APIConnectionError extends SwitchboardError {
  override readonly name: string = 'APIConnectionError';
  constructor(init: { message?: string; cause?: unknown; code?: string }) {
    super({
      status: 0,
      code: init.code ?? 'connection_error',
      message: init.message ?? 'The connection to the API failed before an answer arrived.',
      cause: init.cause,
    });
  }
}
/** No answer arrived within the call's timeout (the `timeout` option). */
export class APITimeoutError extends APIConnectionError {
  override readonly name: string = 'APITimeoutError';
  constructor(timeoutMs: number) {
    super({ code: 'timeout', message: `No answer arrived within the timeout of ${timeoutMs} ms.` });
  }
}

/** The classes of the codes that have their own; other codes get the class of their status. */
const byCode: Record<string, new (init: SwitchboardErrorInit) => SwitchboardError> = {
  spend_cap_exceeded: SpendCapExceededError,
  insufficient_balance: InsufficientBalanceError,
  idempotency_key_reused: IdempotencyKeyReusedError,
};

const byStatus: Record<number, new (init: SwitchboardErrorInit) => SwitchboardError> = {
  400: BadRequestError,
  401: AuthenticationError,
  402: PaymentRequiredError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  415: UnsupportedMediaTypeError,
  422: UnprocessableEntityError,
  429: RateLimitError,
  503: ServiceUnavailableError,
};

/** The error of `init`, as the class of its code, else of its status. */
function errorOf(init: SwitchboardErrorInit): SwitchboardError {
  const Class = byCode[init.code] ?? byStatus[init.status] ?? (init.status >= 500 ? InternalServerError : SwitchboardError);
  return new Class(init);
}

/** Whether `error` is a SwitchboardError, optionally with the given `code`. */
export function isSwitchboardError(error: unknown, code?: string): error is SwitchboardError {
  return error instanceof SwitchboardError && (code === undefined || error.code === code);
}

/** Whether `body` has the shape of the contract's error body. */
export function isErrorBody(body: unknown): body is ErrorBody {
  if (typeof body !== 'object' || body === null) return false;
  const error = (body as { error?: unknown }).error;
  return typeof error === 'object' && error !== null && typeof (error as ErrorDetail).code === 'string' && typeof (error as ErrorDetail).message === 'string';
}

/** Seconds from a `Retry-After` header: delta-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | null {
  if (!value) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - now) / 1000));
}
