import type { MessageInitShape } from '@bufbuild/protobuf';
import type { ListWebhookEventTypesResponseSchema } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { webhookEventCatalog } from '@switchboard/contracts/webhook-events';

/**
 * The event catalog (docs/webhooks.md#the-event-catalog): every type an endpoint can subscribe to,
 * with when it is sent, the JSON Schema of its delivery body and an example. It is the contract's
 * (contracts/src/webhook-events.ts), the same for every caller.
 */
export function listEventTypes(): MessageInitShape<typeof ListWebhookEventTypesResponseSchema> {
  return { data: webhookEventCatalog().map(({ type, description, schema, example }) => ({ type, description, schema, example })) };
}
