/** The event types an endpoint can subscribe to (SPEC §7). */
export const webhookEventTypes = [
  'agent.completed',
  'webhook.test',
  'key.spend_alert',
  'key.created',
  'key.revoked',
  'billing.topup.completed',
  'organization.member.added',
  'organization.member.removed',
  'webhook.endpoint.disabled',
] as const;

export type WebhookEventType = (typeof webhookEventTypes)[number];

const known = new Set<string>(webhookEventTypes);

export function isWebhookEventType(type: string): type is WebhookEventType {
  return known.has(type);
}

/**
 * The events that fan out to a workspace's subscribed endpoints when they arrive on the stream.
 * `key.spend_alert` goes to the key's own alert URL instead, and `webhook.test` only to the
 * endpoint tested: neither fans out.
 */
export const fannedOutTypes: WebhookEventType[] = webhookEventTypes.filter((type) => type !== 'key.spend_alert' && type !== 'webhook.test');
