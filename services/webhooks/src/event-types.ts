import {
  SpendAlertSchema,
  WebhookDeliveryExhaustedSchema,
  WebhookEndpointDisabledSchema,
  WebhookEndpointRecoveredSchema,
  WebhookTestSchema,
} from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { webhookEventMessages } from '@switchboard/contracts/webhook-events';
import { eventTypeOf } from '@switchboard/runtime/event-data';

/** The event types an endpoint can subscribe to: those of the contract's catalog (docs/webhooks.md, "Event types"). */
export const webhookEventTypes: readonly string[] = webhookEventMessages.map(eventTypeOf);

const known = new Set<string>(webhookEventTypes);

export function isWebhookEventType(type: string): boolean {
  return known.has(type);
}

/**
 * The events that fan out to a workspace's subscribed endpoints when they arrive on the stream.
 * `key.spend_alert` goes to the key's own alert URL instead, and `webhook.test` only to the
 * endpoint tested: neither fans out.
 */
export const fannedOutSchemas = webhookEventMessages.filter((schema) => schema !== SpendAlertSchema && schema !== WebhookTestSchema);

/**
 * The operational events about one endpoint (`data.webhook_id`): they go to the workspace's other
 * endpoints only (docs/webhooks.md#event-types), never to the endpoint they are about, which is
 * failing, just recovered or disabled.
 */
const aboutAnEndpoint = new Set([WebhookEndpointDisabledSchema, WebhookDeliveryExhaustedSchema, WebhookEndpointRecoveredSchema].map(eventTypeOf));

/** The endpoint an event of `type` with `data` is about, which its fan-out leaves out. */
export function endpointAbout(type: string, data: { webhook_id?: unknown }): string | undefined {
  return aboutAnEndpoint.has(type) && typeof data.webhook_id === 'string' && data.webhook_id !== '' ? data.webhook_id : undefined;
}
