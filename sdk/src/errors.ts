import type { components } from './schema.js';

/** The error body of every non-2xx answer: `{"error": {code, message, field, request_id, metadata?}}`. */
export type ErrorBody = components['schemas']['Error'];

/** The `error` object of an error body. */
export type ErrorDetail = ErrorBody['error'];

/**
 * A non-2xx answer of the API, thrown by the client's helper methods (`get`, `post`, …). It
 * carries the contract's error body: `code` is the machine-readable snake_case code to branch
 * on (`invalid_credentials`, `spend_cap_exceeded`, …), `field` the input it is about.
 */
export class SwitchboardError extends Error {
  override readonly name = 'SwitchboardError';
  /** The HTTP status, e.g. 401. */
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
  /** The error body as received (the parsed JSON, or the text when it was not JSON). */
  readonly body: unknown;

  constructor(init: {
    status: number;
    code: string;
    message: string;
    field?: string | null;
    requestId?: string | null;
    metadata?: Record<string, unknown>;
    retryAfter?: number | null;
    body?: unknown;
  }) {
    super(init.message);
    this.status = init.status;
    this.code = init.code;
    this.field = init.field ?? null;
    this.requestId = init.requestId ?? null;
    this.metadata = init.metadata ?? {};
    this.retryAfter = init.retryAfter ?? null;
    this.body = init.body;
  }

  /** The error of an answer: `body` is what openapi-fetch parsed from it (JSON, else text). */
  static fromResponse(response: Response, body: unknown): SwitchboardError {
    const headerRequestId = response.headers.get('x-request-id');
    const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
    if (isErrorBody(body)) {
      const { code, message, field, request_id: requestId, metadata } = body.error;
      return new SwitchboardError({
        status: response.status,
        code,
        message,
        field: field ?? null,
        requestId: requestId || headerRequestId,
        metadata: metadata ?? {},
        retryAfter,
        body,
      });
    }
    const text = typeof body === 'string' ? body.trim() : '';
    return new SwitchboardError({
      status: response.status,
      code: `http_${response.status}`,
      message: text ? `HTTP ${response.status}: ${text.slice(0, 200)}` : `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}`,
      requestId: headerRequestId,
      retryAfter,
      body,
    });
  }
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
export function parseRetryAfter(value: string | null): number | null {
  if (!value) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}
