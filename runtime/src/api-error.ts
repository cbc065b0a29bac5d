import type { JsonObject } from '@bufbuild/protobuf';
import type { ErrorBody } from './errors.js';

export interface ApiErrorExtras {
  /** The input path the error is about (`field` of the body). */
  field?: string | null;
  metadata?: JsonObject;
  /** Response headers of this answer (e.g. `Allow` on a 405). */
  headers?: Record<string, string>;
}

/**
 * An answer an HTTP surface (the gateway, the data plane's front door) gives by itself, before
 * or instead of calling a service: its status and the public error body of docs/conventions.md.
 * Errors a service returns are ConnectErrors (`apiError` in errors.ts) that `toHttpError` renders.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly options: ApiErrorExtras = {},
  ) {
    super(message);
  }

  /** The error body, for the request `requestId`. */
  body(requestId: string): ErrorBody {
    return errorBody(this.code, this.message, requestId, this.options.field ?? null, this.options.metadata);
  }
}

/** An error body a surface writes itself (no service involved). */
export function errorBody(code: string, message: string, requestId: string, field: string | null = null, metadata?: JsonObject): ErrorBody {
  const body: ErrorBody = { error: { code, message, field, request_id: requestId } };
  if (metadata) body.error.metadata = metadata;
  return body;
}
