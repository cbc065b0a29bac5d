import type { MessageInitShape } from '@bufbuild/protobuf';
import { type ListValueSchema, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import type { KeySchema, RateLimitsSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { apiError } from '@switchboard/runtime/errors';
import { formatMoney } from '@switchboard/runtime/money';
import { spendLimitStatus } from './spend-limits.js';
import type { BudgetStatus } from './store/budget-spend.js';
import type { KeyRow, KeyWithSpendRow } from './store/keys.js';

/** Another workspace's key is a 404 like a key that does not exist. */
export const keyNotFound = () => apiError(Code.NotFound, 'key_not_found', 'No such key in this workspace.');

/**
 * The key record of docs/api/keys.md#the-key-record (never the full key, never the alert's
 * signing secret), with the key's budgets as `budgetStatuses` found them.
 */
export function toKey(row: KeyWithSpendRow, budgets: readonly BudgetStatus[]): MessageInitShape<typeof KeySchema> {
  return {
    keyId: row.id,
    name: row.name,
    hint: row.hint,
    status: row.status,
    monthlySpendCapUsd: row.monthly_spend_cap_usd ?? undefined,
    monthToDateSpendUsd: formatMoney(row.month_spend_usd),
    alertWebhookUrl: row.alert_webhook_url ?? undefined,
    // The first of the thresholds, for readers of the single threshold (docs/api/keys.md#spend-alerts).
    alertThresholdPct: row.alert_threshold_pct ?? undefined,
    alertThresholdsPct: row.alert_thresholds_pct ?? [],
    routingPolicy: row.routing_policy,
    createdBy: row.created_by,
    createdAt: timestampFromDate(row.created_at),
    lastUsedAt: row.last_used_at ? timestampFromDate(row.last_used_at) : undefined,
    revokedAt: row.revoked_at ? timestampFromDate(row.revoked_at) : undefined,
    scopes: row.scopes,
    expiresAt: row.expires_at ? timestampFromDate(row.expires_at) : undefined,
    allowedModels: allowedModelsOf(row),
    rateLimits: rateLimitsOf(row),
    spendLimits: budgets.map(spendLimitStatus),
    rotatedFrom: row.rotated_from ?? undefined,
  };
}

/** The allow-list as JSON wants it: an array of patterns, or null (absent) for every model. */
export function allowedModelsOf(row: Pick<KeyRow, 'allowed_models'>): MessageInitShape<typeof ListValueSchema> | undefined {
  return row.allowed_models ? { values: row.allowed_models.map((pattern) => ({ kind: { case: 'stringValue', value: pattern } })) } : undefined;
}

/** Always an object; a limit the key does not have is null. */
export function rateLimitsOf(row: Pick<KeyRow, 'requests_per_minute' | 'tokens_per_minute' | 'max_concurrent'>): MessageInitShape<typeof RateLimitsSchema> {
  return {
    requestsPerMinute: row.requests_per_minute ?? undefined,
    tokensPerMinute: row.tokens_per_minute ?? undefined,
    maxConcurrent: row.max_concurrent ?? undefined,
  };
}
