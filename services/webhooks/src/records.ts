import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { DeliveryAttemptSchema, DeliverySchema, WebhookSchema } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import type { AttemptRow, DeliveryRow } from './store/deliveries.js';
import type { EndpointRow } from './store/endpoints.js';

const timestamp = (date: Date | null) => (date ? timestampFromDate(date) : undefined);

/** The webhook record of docs/webhooks.md#endpoints (the secret only where the caller adds it, once). */
export function toWebhook(row: EndpointRow, secret?: string): MessageInitShape<typeof WebhookSchema> {
  return {
    webhookId: row.id,
    workspaceId: row.workspace_id,
    url: row.url,
    events: row.events,
    description: row.description ?? undefined,
    enabled: row.enabled,
    disabledReason: row.disabled_reason ?? undefined,
    disabledAt: timestamp(row.disabled_at),
    failingSince: timestamp(row.failing_since),
    createdAt: timestampFromDate(row.created_at),
    updatedAt: timestampFromDate(row.updated_at),
    secret,
  };
}

function toAttempt(row: AttemptRow): MessageInitShape<typeof DeliveryAttemptSchema> {
  return {
    attemptId: row.id,
    deliveryId: row.delivery_id,
    url: row.url,
    status: row.status,
    responseStatusCode: row.response_status_code,
    errorClass: row.error_class ?? undefined,
    durationMs: row.duration_ms,
    responseBody: row.response_body ?? undefined,
    trigger: row.trigger,
    createdAt: timestampFromDate(row.created_at),
  };
}

/** The delivery record of docs/webhooks.md#deliveries-retries-and-their-schedule with its attempts, oldest first. */
export function toDelivery(row: DeliveryRow, attempts: AttemptRow[]): MessageInitShape<typeof DeliverySchema> {
  return {
    deliveryId: row.id,
    webhookId: row.endpoint_id,
    eventId: row.event_id,
    eventType: row.event_type,
    status: row.status,
    attemptCount: row.attempt_count,
    attempts: attempts.map(toAttempt),
    nextAttemptAt: timestamp(row.next_attempt_at),
    createdAt: timestampFromDate(row.created_at),
    succeededAt: timestamp(row.succeeded_at),
  };
}
