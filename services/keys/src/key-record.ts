import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { KeySchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { formatMoney } from '@switchboard/runtime/money';
import type { KeyWithSpendRow } from './store/keys.js';

/** The key record of docs/api/keys.md#the-key-record (never the full key, never the alert's signing secret). */
export function toKey(row: KeyWithSpendRow): MessageInitShape<typeof KeySchema> {
  return {
    keyId: row.id,
    name: row.name,
    hint: row.hint,
    status: row.status,
    monthlySpendCapUsd: row.monthly_spend_cap_usd ?? undefined,
    monthToDateSpendUsd: formatMoney(row.month_spend_usd),
    alertWebhookUrl: row.alert_webhook_url ?? undefined,
    alertThresholdPct: row.alert_threshold_pct ?? undefined,
    routingPolicy: row.routing_policy,
    createdBy: row.created_by,
    createdAt: timestampFromDate(row.created_at),
    lastUsedAt: row.last_used_at ? timestampFromDate(row.last_used_at) : undefined,
    revokedAt: row.revoked_at ? timestampFromDate(row.revoked_at) : undefined,
  };
}
