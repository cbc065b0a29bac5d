import type { JsonObject } from '@bufbuild/protobuf';
import { type Timestamp, timestampDate } from '@bufbuild/protobuf/wkt';
import { KeyRefusal, KeyRefusalSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { ApiError, type ApiErrorExtras } from './api-error.js';
import { enumFromWire } from './wire-enum.js';

/**
 * The errors the HTTP surfaces answer by themselves when they check credentials (the gateway's
 * REST surface, docs/conventions.md; the data plane's front door, docs/api/front-door.md): one
 * entry per public `error.code`, read by the code that answers it and by the OpenAPI document
 * that describes it, so the two cannot drift.
 */
export interface CataloguedError {
  status: number;
  code: string;
  /** The body's `message`. */
  message: string;
  /** The front door's `message`, where it differs. */
  frontDoorMessage?: string;
  /** When it happens, in the OpenAPI document's words. */
  when: string;
  /** The `metadata` of the OpenAPI document's example body. */
  exampleMetadata?: JsonObject;
}

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
  spendCapExceeded: {
    status: 402,
    code: 'spend_cap_exceeded',
    message: 'This key has reached its monthly spend cap; raise or clear the cap, or wait for the next month (resets_at).',
    // The front door asks with the request's estimate: there the request would cross the cap.
    frontDoorMessage: "This request would take the key's spend past its monthly cap; raise or clear the cap, or wait for the next month.",
    when: 'The API key reached its monthly spend cap; raise or clear the cap, or wait for `resets_at`.',
    exampleMetadata: { scope: 'key', cap_usd: '50.00', spend_usd: '50.02', resets_at: '2026-12-01T00:00:00Z' },
  },
  insufficientBalance: {
    status: 402,
    code: 'insufficient_balance',
    message: "The workspace's balance is used up; top it up to continue.",
    when: "The workspace's prepaid balance is at or below zero (model requests only).",
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
} as const satisfies Record<string, CataloguedError>;

/** Where an error is answered: the management REST surface, or the model requests' front door. */
export type Surface = 'rest' | 'front-door';

/** The answer of an error of the catalogue on `surface`. */
export function catalogued(entry: CataloguedError, options: ApiErrorExtras = {}, surface: Surface = 'rest'): ApiError {
  const message = surface === 'front-door' ? (entry.frontDoorMessage ?? entry.message) : entry.message;
  return new ApiError(entry.status, entry.code, message, options);
}

/** What AuthorizeKey and AuthenticateKey answer about a key: its refusal, with the cap's facts. */
export interface KeyAnswer {
  reason: string;
  capUsd?: string;
  spendUsd?: string;
  resetsAt?: Timestamp;
}

/** The facts of a 402 spend_cap_exceeded (docs/api/keys.md): never the key itself. */
const capFacts = (answer: KeyAnswer): JsonObject => ({
  scope: 'key',
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
