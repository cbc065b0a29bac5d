import { permissionTable } from './security.js';

/** info.description: what holds for every operation (versions, credentials, JSON, lists, errors) and the role table. */
export function describeApi(aliasedGroups: string[]): string {
  return [
    'The management plane of Switchboard: accounts, organizations, API keys with monthly spend caps, prepaid billing, conversations, feedback and signed webhooks. Generated from the protobuf definitions the gateway serves.',
    '',
    `**Versions.** Canonical paths start with \`/v1\` and are the only ones listed here. Every group except webhooks also answers without the \`/v1\` prefix, with the same handlers (${aliasedGroups.map((g) => `\`${g}\``).join(', ')}); webhook paths exist only under \`/v1\`.`,
    '',
    '**Authentication.** `Authorization: Bearer <access token>` (a JWT from login) or `Authorization: Bearer <API key>` (`sb_…`), as each operation says. A user request acts in the workspace named by `X-Workspace-Id`, else in the personal workspace. An API key acts as its creator, within its scopes: `inference` (model requests, `GET /v1/key`, its own generations, feedback), `read` (the other GETs) and `manage` (every other call); each operation names the one it needs (`x-required-scope`), and a key without it gets 403 `insufficient_scope`.',
    '',
    '**JSON.** Requests and responses use snake_case proto field names; unknown request fields are ignored; wrong types are a 400 naming the field. In responses every field is present: unset values are `null`, empty lists `[]`, empty maps `{}` (fields that are only sometimes sent, such as secrets shown once, are left out instead). Timestamps are RFC 3339 UTC strings; money is a decimal string such as `"12.50"`.',
    '',
    '**Lists.** `?limit=` (1..100, default 20) and `?after=<cursor>`; the result is `{"data": [...], "has_more": bool, "next_cursor": string|null}`.',
    '',
    '**Errors.** Every non-2xx response has the body `{"error": {"code", "message", "field", "request_id", "metadata"?}}` and every response the `X-Request-Id` header. Sign-in calls answer 401 `invalid_credentials` or `invalid_code` on a wrong password or code. Bodies over 1 MiB are a 413.',
    '',
    "**Retries and limits.** Every `POST` takes an `Idempotency-Key` header (1..255 printable ASCII characters): a retry with the same key and request within 24 hours answers the first result again, with `Idempotent-Replayed: true`. Every answer carries the caller's REST rate limit in `RateLimit-Policy` and `RateLimit`; over it, 429 `rate_limited` with `Retry-After`.",
    '',
    "**Model requests.** `POST /v1/chat/completions` and `GET /v1/models` (tag *Front door*) are OpenAI-compatible: API keys only, OpenAI-shaped errors, and the key's own rate limits.",
    '',
    '**Permissions.** Each operation says who may call it (a line in its description and the `x-switchboard-access` extension: the rule, the credentials, and the actions with the roles allowed). Roles per action (`own`: only on objects the caller created):',
    '',
    ...permissionTable(),
    '',
    'This document is served at `GET /v1/openapi.json` and rendered at `GET /docs`.',
  ].join('\n');
}
