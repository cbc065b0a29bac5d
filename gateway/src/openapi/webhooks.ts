import { webhookEventCatalog } from '@switchboard/contracts/webhook-events';
import type { Json } from './json-schema.js';

/**
 * The document's `webhooks` (OpenAPI 3.1): one per event type of the contract's catalog
 * (contracts/src/webhook-events.ts, the same one `GET /v1/webhook-event-types` serves), the
 * `POST` Switchboard sends to a subscribed endpoint, with the body's JSON Schema, an example and
 * the Standard Webhooks headers (docs/webhooks.md#signatures).
 */

const signatureHeaders: Json[] = [
  {
    name: 'webhook-id',
    in: 'header',
    required: true,
    description: 'The delivery id (`dlv_…`): the same on every attempt of one delivery. Deduplicate on it.',
    schema: { type: 'string' },
  },
  { name: 'webhook-timestamp', in: 'header', required: true, description: 'Unix seconds of this attempt.', schema: { type: 'string', pattern: '^[0-9]+$' } },
  {
    name: 'webhook-signature',
    in: 'header',
    required: true,
    description:
      '`v1,<base64 of HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")>`; two, separated by a space, while a rotated secret is in its grace period.',
    schema: { type: 'string' },
  },
];

export function webhooksOf(): Record<string, Json> {
  const webhooks: Record<string, Json> = {};
  for (const { type, description, schema, example } of webhookEventCatalog()) {
    webhooks[type] = {
      post: {
        operationId: `webhook_${type.replaceAll('.', '_')}`,
        summary: type,
        description: `${description}\n\nDelivered as a signed \`POST\` of this body (docs/webhooks.md#signatures).`,
        security: [],
        parameters: signatureHeaders,
        requestBody: { required: true, content: { 'application/json': { schema, example } } },
        responses: {
          '2XX': { description: 'Received: any 2xx within 15 s ends the delivery. Anything else (a redirect included) is retried.' },
          '410': { description: 'Gone: the endpoint is disabled at once and receives nothing more.' },
        },
      },
    };
  }
  return webhooks;
}
