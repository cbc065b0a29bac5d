/**
 * The Switchboard SDK: a typed client of the REST API (generated from /v1/openapi.json by
 * `npm run gen`) with resource methods, retries, idempotency keys and timeouts, its errors, the
 * pagination helper, webhook verification and the front door's chat completions.
 */
export type {
  AssistantMessage,
  Chat,
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParams,
  ChatCompletionStream,
  ChatCompletionUsage,
  ChatMessage,
  ChatRequestOptions,
  Model,
  Models,
  ServiceInfo,
} from './chat.js';
export {
  type Credentials,
  createSwitchboardClient,
  type DataMethod,
  type Schemas,
  type Session,
  type SuccessData,
  type SwitchboardClient,
  type SwitchboardClientOptions,
} from './client.js';
export {
  APIConnectionError,
  APITimeoutError,
  AuthenticationError,
  BadRequestError,
  ConflictError,
  type ErrorBody,
  type ErrorDetail,
  IdempotencyKeyReusedError,
  InsufficientBalanceError,
  InternalServerError,
  isSwitchboardError,
  NotFoundError,
  PayloadTooLargeError,
  PaymentRequiredError,
  PermissionDeniedError,
  RateLimitError,
  ServiceUnavailableError,
  SpendCapExceededError,
  SwitchboardError,
  type SwitchboardErrorInit,
  UnprocessableEntityError,
  UnsupportedMediaTypeError,
} from './errors.js';
export { type FetchPage, type Page, type Paginated, paginate } from './pagination.js';
export type { BodyOf, ItemOf, ListQuery, QueryOf, Resources, ResultOf } from './resources.js';
export type { components, operations, paths, webhooks } from './schema.js';
export type { BackoffOptions, RequestOptions } from './transport.js';
export { type VerifyOptions, verifyWebhook, type WebhookEvent, type WebhookHeaders, WebhookVerificationError } from './webhooks.js';
