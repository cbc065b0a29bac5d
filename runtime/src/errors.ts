import type { JsonObject } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { errorCatalogue } from './error-catalogue.js';

/** The public error body of docs/conventions.md#errors. */
export interface ErrorBody {
  error: {
    code: string;
    message: string;
    field: string | null;
    request_id: string;
    metadata?: JsonObject;
  };
}

export interface ApiErrorOptions {
  field?: string;
  metadata?: JsonObject;
  /** Only for statuses no Connect code names: 402, 413, 415, 422. */
  httpStatus?: number;
}

/**
 * An error a handler throws to answer the client: a Connect code for RPC callers, plus the
 * public error code, field and metadata the gateway renders.
 */
export function apiError(code: Code, errorCode: string, message: string, options: ApiErrorOptions = {}): ConnectError {
  return new ConnectError(message, code, undefined, [
    {
      desc: ErrorDetailSchema,
      value: {
        code: errorCode,
        field: options.field ?? '',
        metadata: options.metadata,
        httpStatus: options.httpStatus ?? 0,
      },
    },
  ]);
}

export const invalidArgument = (field: string, message: string, errorCode = 'invalid_request') => apiError(Code.InvalidArgument, errorCode, message, { field });

/**
 * An error to retry after a while: a 429 by default (or `code`, e.g. Unavailable for a 503), with
 * `retry_after_seconds` in the metadata and a Retry-After header (the gateway copies it).
 */
export function retryLater(errorCode: string, message: string, retryAfterSeconds: number, code = Code.ResourceExhausted): ConnectError {
  const err = apiError(code, errorCode, message, { metadata: { retry_after_seconds: retryAfterSeconds } });
  err.metadata.set('retry-after', String(retryAfterSeconds));
  return err;
}

export const notFound = (what: string) => apiError(Code.NotFound, 'not_found', `${what} not found`);

/** A well-formed request that breaks a business rule (HTTP 422). */
export const unprocessable = (errorCode: string, message: string, options: Omit<ApiErrorOptions, 'httpStatus'> = {}) =>
  apiError(Code.FailedPrecondition, errorCode, message, { ...options, httpStatus: 422 });

const statusByCode: Record<Code, number> = {
  [Code.Canceled]: 503,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 503,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 422,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

const defaultErrorCode: Record<number, string> = {
  400: 'invalid_request',
  401: 'unauthenticated',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  422: 'unprocessable',
  429: 'rate_limited',
  500: 'internal_error',
  501: 'not_implemented',
  503: 'service_unavailable',
};

/** HTTP status and public body for an error coming back from a service. */
export function toHttpError(err: ConnectError, requestId: string): { status: number; body: ErrorBody } {
  const detail = err.findDetails(ErrorDetailSchema)[0];
  const status = detail?.httpStatus || statusByCode[err.code] || 500;
  // A 5xx never shows internals: the message a service wrote for an unexpected failure stays in its log.
  const message = status === 500 ? errorCatalogue.internalError.message : err.rawMessage || 'Request failed';
  const body: ErrorBody = {
    error: {
      code: detail?.code || defaultErrorCode[status] || 'error',
      message: status === 501 && !detail ? 'This operation is not implemented yet.' : message,
      field: detail?.field || null,
      request_id: requestId,
    },
  };
  if (detail?.metadata && Object.keys(detail.metadata).length > 0) body.error.metadata = detail.metadata;
  if (status === 503 && !detail) body.error.message = errorCatalogue.serviceUnavailable.message({});
  return { status, body };
}

// errorBody lives beside ApiError, which writes it: this file reads the error catalogue, and the catalogue's
// ApiError must not import this file back (no import cycle).
export { errorBody } from './api-error.js';
