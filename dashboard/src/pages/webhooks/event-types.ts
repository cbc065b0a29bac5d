/**
 * The event types an endpoint can subscribe to (webhooks.proto, CreateWebhookRequest.events;
 * docs/webhooks.md, "Event types"). `webhook.test` and `key.spend_alert` never come through a
 * subscription, so they are not offered.
 */
export const eventTypes: { type: string; when: string }[] = [
  { type: 'agent.completed', when: 'an agent runtime reports a completed run' },
  { type: 'key.created', when: 'an API key was created' },
  { type: 'key.revoked', when: 'an API key was revoked' },
  { type: 'billing.topup.completed', when: 'a payment was credited' },
  { type: 'organization.member.added', when: 'someone joined the organization' },
  { type: 'organization.member.removed', when: 'a member left or was removed' },
  { type: 'webhook.endpoint.disabled', when: 'another endpoint was disabled by the service' },
];

/** An endpoint's subscription in words: `[]` is every type. */
export function describeEvents(events: string[]): string {
  return events.length === 0 ? 'Every event type' : events.join(', ');
}
