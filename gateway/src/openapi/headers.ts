import type { Json } from './json-schema.js';

/**
 * The headers the document names: the request's `Idempotency-Key` (docs/conventions.md#idempotency)
 * and the responses' request id, rate limits (docs/conventions.md#rate-limits), retry hints and
 * replays, shared as components and referenced by every operation.
 */

const ref = (name: string): Json => ({ $ref: `#/components/headers/${name}` });

/** `Idempotency-Key`: 1..255 printable ASCII characters (space to tilde). */
export const IDEMPOTENCY_KEY_PARAMETER = 'IdempotencyKey';

export const idempotencyKeyParameter: Json = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Makes a retry of this POST safe: the same key with the same route, query and body, from the same caller and workspace within 24 hours, answers the first status and body again (with `Idempotent-Replayed: true`) instead of running again; a retry that arrives while the first runs waits for it. The same key with another request is a 422 `idempotency_key_reused`. Answers with a status of 500 or more, and 429s, are not kept, so retrying them runs the request again. Use a new key per intended call (a UUID). The body field `idempotency_key` of a top-up keeps its own meaning.',
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7E]+$' },
  example: 'a3c1e4f2-6d0b-4c55-9d0e-2f5b8f6b7c11',
};

export const headerComponents: Record<string, Json> = {
  'X-Request-Id': {
    description: 'The request id (taken from the request when sent, else new); also in error bodies.',
    schema: { type: 'string' },
  },
  'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Policy': {
    description:
      'The REST rate limit that applies to the caller (IETF draft-ietf-httpapi-ratelimit-headers, a structured field): `"default";q=<requests>;w=60`, per user or API key, or per client address on routes without credentials and on a 401. On every answer of the REST surface, errors included (not on the front door, whose keys have limits of their own).',
    schema: { type: 'string', pattern: '^"default";q=[0-9]+;w=60$' },
    example: '"default";q=600;w=60',
  },
  RateLimit: {
    description:
      'What is left of the REST rate limit: `"default";r=<remaining requests>;t=<seconds until the window resets>` (IETF draft-ietf-httpapi-ratelimit-headers).',
    schema: { type: 'string', pattern: '^"default";r=[0-9]+;t=[0-9]+$' },
    example: '"default";r=599;t=60',
  },
  'Idempotent-Replayed': {
    description:
      'On a POST sent with `Idempotency-Key`: `true` when this answer is the replay of the first request with that key (nothing ran again). Refusals of the service (4xx other than 401, 413, 415 and 429) are replayed too and carry it; answers of 500 or more are never kept.',
    schema: { type: 'string', enum: ['true'] },
  },
};

/**
 * The headers of a REST answer with `status`: request id and rate limits always, a retry hint
 * where waiting helps, and on a POST's success the replay flag (a replayed refusal carries it
 * too; the header's description says which, so error responses stay shared across methods).
 */
export function restHeaders(status: number, post: boolean): Json {
  return {
    'X-Request-Id': ref('X-Request-Id'),
    'RateLimit-Policy': ref('RateLimit-Policy'),
    RateLimit: ref('RateLimit'),
    ...(status === 429 || status === 503 ? { 'Retry-After': ref('Retry-After') } : {}),
    ...(post && status < 300 ? { 'Idempotent-Replayed': ref('Idempotent-Replayed') } : {}),
  };
}
