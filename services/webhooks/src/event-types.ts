import { SpendAlertSchema, WebhookTestSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
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
