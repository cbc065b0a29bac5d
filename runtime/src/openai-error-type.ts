/**
 * OpenAI's error `type` of each status, which the front door adds to the error body so OpenAI
 * SDKs raise their typed errors (docs/api/front-door.md#errors); the OpenAPI document lists the
 * same values.
 */
export const openAiErrorTypes = [
  'invalid_request_error',
  'authentication_error',
  'insufficient_quota',
  'permission_error',
  'not_found_error',
  'rate_limit_error',
  'api_error',
] as const;

export type OpenAiErrorType = (typeof openAiErrorTypes)[number];

/** OpenAI's error type for a status. */
export function openAiErrorType(status: number): OpenAiErrorType {
  if (status === 401) return 'authentication_error';
  if (status === 402) return 'insufficient_quota';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}
