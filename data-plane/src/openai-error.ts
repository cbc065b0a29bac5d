import { Code, ConnectError } from '@connectrpc/connect';
import { ApiError } from '@switchboard/runtime/api-error';
import { type ErrorBody, toHttpError } from '@switchboard/runtime/errors';
import { openAiErrorType } from '@switchboard/runtime/openai-error-type';

/**
 * Errors of the front door: the body of docs/conventions.md#errors plus OpenAI's `type` and `param`, so OpenAI SDKs
 * raise their typed errors (AuthenticationError for 401, an APIError with the status otherwise).
 */
export interface OpenAiErrorBody {
  error: ErrorBody['error'] & { type: string; param: string | null };
}

/** The status and body of any error a request ends with (a mesh call's included). */
export function toErrorResponse(err: unknown, requestId: string): { status: number; body: OpenAiErrorBody; retryAfterSeconds?: number } {
  let status: number;
  let error: ErrorBody['error'];
  if (err instanceof ApiError) {
    status = err.status;
    ({ error } = err.body(requestId));
  } else {
    const connect = ConnectError.from(err);
    // The mesh refusing the data plane itself (a rotated mesh secret, clock skew) is not the
    // client's credential problem: a dependency is unavailable.
    const fromMesh = connect.code === Code.Unauthenticated || connect.code === Code.PermissionDenied;
    ({
      status,
      body: { error },
    } = toHttpError(fromMesh ? new ConnectError(connect.rawMessage, Code.Unavailable) : connect, requestId));
  }
  // A mesh service that is away (a restart, an outage) comes back within seconds: say when to retry.
  return { status, body: { error: { ...error, type: openAiErrorType(status), param: error.field } }, retryAfterSeconds: status === 503 ? 1 : undefined };
}

/**
 * The last event of a stream that ends with `err` after its first byte (docs/api/front-door.md#streams):
 * the status is sent already, so the body has no request id or field, only what OpenAI SDKs read.
 */
export function streamErrorEvent(err: ApiError): { error: { code: string; message: string; type: string; param: null } } {
  return { error: { code: err.code, message: err.message, type: openAiErrorType(err.status), param: null } };
}
