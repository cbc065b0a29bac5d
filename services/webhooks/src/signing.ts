import { createHmac } from 'node:crypto';

/**
 * Standard Webhooks signatures: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` under the
 * base64 part of each `whsec_` secret, space-separated when a rotation's grace period lets the
 * previous secret sign too (receivers accept any one that verifies).
 */
export function signatureHeaders(deliveryId: string, body: string, secrets: string[], now: Date): Record<string, string> {
  const timestamp = Math.floor(now.getTime() / 1000).toString();
  const signed = `${deliveryId}.${timestamp}.${body}`;
  const signatures = secrets.map((secret) => `v1,${createHmac('sha256', secretBytes(secret)).update(signed).digest('base64')}`);
  return { 'webhook-id': deliveryId, 'webhook-timestamp': timestamp, 'webhook-signature': signatures.join(' ') };
}

function secretBytes(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
}
