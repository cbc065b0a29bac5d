import type { webhooks } from './schema.js';

/** Every event Switchboard delivers, as the document's `webhooks` section describes its body (docs/webhooks.md#event-types). */
export type WebhookEvent = {
  [Type in keyof webhooks]: webhooks[Type]['post'] extends { requestBody?: { content: { 'application/json': infer Body } } } ? Body : never;
}[keyof webhooks];

/** A delivery whose signature, timestamp or body does not check out: answer it with a 400 and ignore it. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
}

/** The request headers of a delivery: a fetch `Headers`, or Node's `req.headers`. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** How far `webhook-timestamp` may be from the clock, in seconds (default 300, as the standardwebhooks library). */
  toleranceSeconds?: number;
  /** The clock, in milliseconds (default Date.now()). */
  now?: number;
}

const encoder = new TextEncoder();

/**
 * Verifies a delivery as the Standard Webhooks specification says (docs/webhooks.md#verifying-a-delivery):
 * the HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<raw body>` under the bytes of the base64
 * after `whsec_` must equal one of the space-separated `v1,` signatures (two during a secret's
 * rotation), compared in constant time, and the timestamp must be within five minutes of the
 * clock (a replayed old delivery is refused). Answers the parsed event; throws
 * WebhookVerificationError otherwise. `payload` is the raw body, before any JSON parsing.
 * Web Crypto only, so it runs in Node 20, browsers and edge runtimes alike.
 */
export async function verifyWebhook(payload: string | Uint8Array, headers: WebhookHeaders, secret: string, options: VerifyOptions = {}): Promise<WebhookEvent> {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures) throw new WebhookVerificationError('The webhook-id, webhook-timestamp and webhook-signature headers are required.');
  if (!/^\d+$/.test(timestamp)) throw new WebhookVerificationError('webhook-timestamp is not unix seconds.');
  const now = (options.now ?? Date.now()) / 1000;
  if (Math.abs(now - Number(timestamp)) > (options.toleranceSeconds ?? 300)) throw new WebhookVerificationError('webhook-timestamp is too far from the clock.');

  let keyBytes: Uint8Array;
  try {
    keyBytes = fromBase64(secret.replace(/^whsec_/, ''));
  } catch {
    throw new WebhookVerificationError('The secret is not whsec_ followed by base64.');
  }
  const body = typeof payload === 'string' ? payload : new TextDecoder().decode(payload);
  const key = await globalThis.crypto.subtle.importKey('raw', keyBytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const expected = new Uint8Array(await globalThis.crypto.subtle.sign('HMAC', key, encoder.encode(`${id}.${timestamp}.${body}`)));
  const matches = signatures.split(' ').some((signature) => {
    if (!signature.startsWith('v1,')) return false;
    try {
      return constantTimeEqual(fromBase64(signature.slice(3)), expected);
    } catch {
      return false;
    }
  });
  if (!matches) throw new WebhookVerificationError('No signature matches the secret.');
  try {
    return JSON.parse(body) as WebhookEvent;
  } catch {
    throw new WebhookVerificationError('The body is not JSON.');
  }
}

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (headers instanceof Headers) return headers.get(name) ?? undefined;
  const value = headers[name] ?? Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1];
  return Array.isArray(value) ? value[0] : value;
}

function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
}

/** Equal bytes, in a time that depends only on the length (the length of an HMAC is no secret). */
function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i] ^ b[i];
  return difference === 0;
}
