import type { Received } from '@switchboard/runtime/dev/webhook-receiver';
import { Webhook } from 'standardwebhooks';

export { type Received, type Reply, WebhookReceiver } from '@switchboard/runtime/dev/webhook-receiver';

/** Verifies a received delivery the way a receiver author would, with the `standardwebhooks` package. */
export function verifyDelivery(secret: string, request: Received): unknown {
  return new Webhook(secret).verify(request.body, {
    'webhook-id': String(request.headers['webhook-id']),
    'webhook-timestamp': String(request.headers['webhook-timestamp']),
    'webhook-signature': String(request.headers['webhook-signature']),
  });
}
