import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { verifyWebhook, WebhookVerificationError } from '../src/index.js';

/**
 * `webhooks.verify` against signatures made by the `standardwebhooks` library, the reference the
 * deliveries follow (docs/webhooks.md#signatures), and against what it must refuse.
 */

const secret = () => `whsec_${randomBytes(32).toString('base64')}`;
const body = JSON.stringify({ type: 'webhook.test', timestamp: '2026-11-26T10:00:00.000Z', data: { webhook_id: 'wh_1' } });
const at = new Date('2026-11-26T10:00:00Z');
const now = at.getTime();

function delivery(signingSecret: string, timestamp = at, id = 'dlv_1') {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    'webhook-signature': new Webhook(signingSecret).sign(id, timestamp, body),
  };
}

async function refusal(call: Promise<unknown>): Promise<string> {
  const error = await call.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(WebhookVerificationError);
  return (error as Error).message;
}

describe('webhooks.verify', () => {
  it('accepts a delivery signed as the library signs, from Node headers, fetch Headers or bytes', async () => {
    const key = secret();
    const headers = delivery(key);
    expect(await verifyWebhook(body, headers, key, { now })).toEqual(JSON.parse(body));
    expect((await verifyWebhook(new TextEncoder().encode(body), new Headers(headers), key, { now })).type).toBe('webhook.test');
    // Node's req.headers: lower-case names; a repeated header is an array.
    expect(await verifyWebhook(body, { ...headers, 'webhook-id': [headers['webhook-id']] }, key, { now })).toBeTruthy();
  });

  it('accepts either signature during a rotation', async () => {
    const [old, fresh] = [secret(), secret()];
    const headers = delivery(fresh);
    const both = { ...headers, 'webhook-signature': `${delivery(old)['webhook-signature']} ${headers['webhook-signature']}` };
    expect(await verifyWebhook(body, both, old, { now })).toBeTruthy();
    expect(await verifyWebhook(body, both, fresh, { now })).toBeTruthy();
  });

  it('refuses another secret, another body, another id, an old timestamp, and missing headers', async () => {
    const key = secret();
    const headers = delivery(key);
    expect(await refusal(verifyWebhook(body, headers, secret(), { now }))).toMatch(/No signature/);
    expect(await refusal(verifyWebhook(`${body} `, headers, key, { now }))).toMatch(/No signature/);
    expect(await refusal(verifyWebhook(body, { ...headers, 'webhook-id': 'dlv_2' }, key, { now }))).toMatch(/No signature/);
    expect(await refusal(verifyWebhook(body, headers, key, { now: now + 301_000 }))).toMatch(/too far/);
    expect(await refusal(verifyWebhook(body, delivery(key, new Date(now - 600_000)), key, { now }))).toMatch(/too far/);
    expect(await refusal(verifyWebhook(body, { 'webhook-id': 'dlv_1' }, key, { now }))).toMatch(/required/);
    expect(await refusal(verifyWebhook(body, { ...headers, 'webhook-signature': 'v2,abc' }, key, { now }))).toMatch(/No signature/);
  });
});
