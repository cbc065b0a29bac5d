import type { LocalCertificate } from '@switchboard/runtime/dev/local-certificate';
import { type Received, WebhookReceiver as Receiver } from '@switchboard/runtime/dev/webhook-receiver';
import { Webhook } from 'standardwebhooks';
import { checkDeliveredPayload } from './webhook-payloads.js';

export type { Received, Reply } from '@switchboard/runtime/dev/webhook-receiver';

/** The tests' HTTPS webhook receiver: every body it gets is checked against the event catalog (webhook-payloads.ts). */
export type WebhookReceiver = Receiver;
export const WebhookReceiver = {
  start: (certificate: LocalCertificate): Promise<WebhookReceiver> =>
    Receiver.start(certificate, (request) => checkDeliveredPayload(request, `receiver path ${request.path}`)),
};

/** Verifies a received delivery the way a receiver author would, with the `standardwebhooks` package. */
export function verifyDelivery(secret: string, request: Received): unknown {
  return new Webhook(secret).verify(request.body, {
    'webhook-id': String(request.headers['webhook-id']),
    'webhook-timestamp': String(request.headers['webhook-timestamp']),
    'webhook-signature': String(request.headers['webhook-signature']),
  });
}
