import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createDb, type Knex } from '@switchboard/runtime/db';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { freePort } from '@switchboard/runtime/infra';
import { eventually } from '@switchboard/runtime/testing';
import { EventBus } from '@switchboard/testkit/events';
import { FakeStripe } from '@switchboard/testkit/fake-stripe';
import { bootMesh, expectErrorBody, newUser, restClient } from '@switchboard/testkit/mesh';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Stripe Checkout through its real path (docs/api/billing.md#stripe-checkout): the billing service creates Checkout Sessions
 * on a local stand-in of Stripe's API (STRIPE_API_BASE; no network), and Stripe's events reach
 * REST → gateway → billing signed with the library's own test helper. A paid session credits its
 * checkout exactly once, whatever is replayed, redelivered concurrently, or forged.
 */

const webhookPath = '/v1/billing/providers/stripe/webhook';

let mesh: Mesh;
let call: ReturnType<typeof restClient>;
let fake: FakeStripe;
let bus: EventBus;
let db: Knex;
let webhookSecret: string;

beforeAll(async () => {
  fake = await FakeStripe.start();
  webhookSecret = fake.webhookSecret;
  mesh = await bootMesh({ ...fake.env(), STRIPE_SUCCESS_URL: 'https://app.example.test/billing?paid=1' });
  call = restClient(mesh.gatewayUrl);
  bus = await EventBus.connect();
  db = createDb(mesh.env.DATABASE_URL, 'billing', 2);
});

afterAll(async () => {
  await db?.destroy();
  await bus?.close();
  await mesh?.stop();
  await fake?.close();
});

interface Workspace {
  token: string;
  workspaceId: string;
}

async function workspace(): Promise<Workspace> {
  const registered = await call('POST', '/v1/auth/register', { body: newUser() });
  expect(registered.status, registered.text).toBe(201);
  return { token: registered.json.session.access_token, workspaceId: registered.json.user.personal_workspace_id };
}

let keys = 0;
async function checkout(ws: Workspace, amount: string | number) {
  keys += 1;
  const created = await call('POST', '/v1/billing/checkout', { token: ws.token, body: { amount_usd: amount, idempotency_key: `stripe-topup-${keys}` } });
  expect(created.status, created.text).toBe(201);
  const [request] = fake.of(created.json.checkout_id);
  expect(request, 'the session request of the checkout').toBeDefined();
  return { checkout: created.json, sessionId: request.objectId as string, request };
}

let events = 0;
/** A Stripe event as Stripe sends it (a snapshot of the session). */
function stripeEvent(type: string, session: Record<string, unknown>) {
  events += 1;
  return {
    id: `evt_test_${Date.now().toString(36)}${events}`,
    object: 'event',
    api_version: '2026-10-28.endive',
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
    data: { object: { object: 'checkout.session', mode: 'payment', status: 'complete', payment_status: 'paid', ...session } },
  };
}

function paidEvent(sessionId: string, fields: Record<string, unknown> = {}) {
  return stripeEvent('checkout.session.completed', { id: sessionId, ...fields });
}

/** Delivers `payload` as Stripe does: the raw JSON with its Stripe-Signature (or `signature`). */
function deliver(payload: string, signature = Stripe.webhooks.generateTestHeaderString({ payload, secret: webhookSecret })) {
  const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8', 'user-agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)' };
  if (signature) headers['stripe-signature'] = signature;
  return call('POST', webhookPath, { rawBody: payload, headers });
}

async function balanceOf(ws: Workspace): Promise<string> {
  const balance = await call('GET', '/v1/billing/balance', { token: ws.token });
  expect(balance.status, balance.text).toBe(200);
  return balance.json.balance_usd;
}

async function topupOf(ws: Workspace, checkoutId: string) {
  const listed = await call('GET', '/v1/billing/topups', { token: ws.token });
  expect(listed.status, listed.text).toBe(200);
  return listed.json.data.find((t: { checkout_id: string }) => t.checkout_id === checkoutId);
}

describe('starting a Stripe checkout', () => {
  it('creates one Checkout Session in exact USD cents, keyed by the checkout id', async () => {
    const ws = await workspace();
    const { checkout: created, request, sessionId } = await checkout(ws, '12.34');
    expect(created).toMatchObject({ amount_usd: '12.34', status: 'pending', checkout_url: `https://checkout.stripe.test/c/pay/${sessionId}` });
    expect(request.authorization).toBe('Bearer sk_test_switchboard_fake');
    expect(request.idempotencyKey).toBe(created.checkout_id);
    const p = request.params;
    expect(p.get('mode')).toBe('payment');
    expect(p.get('line_items[0][quantity]')).toBe('1');
    expect(p.get('line_items[0][price_data][currency]')).toBe('usd');
    expect(p.get('line_items[0][price_data][unit_amount]')).toBe('1234');
    expect(p.get('client_reference_id')).toBe(created.checkout_id);
    expect(p.get('metadata[checkout_id]')).toBe(created.checkout_id);
    expect(p.get('metadata[workspace_id]')).toBe(ws.workspaceId);
    expect(p.get('success_url')).toBe(`https://app.example.test/billing?paid=1&workspace_id=${ws.workspaceId}&checkout_id=${created.checkout_id}`);
    // By default the payer comes back to the dashboard's billing page, in the checkout's workspace.
    expect(p.get('cancel_url')).toBe(`${mesh.env.PUBLIC_BASE_URL}/app/billing?workspace_id=${ws.workspaceId}&checkout_id=${created.checkout_id}`);
    // Payable no longer than the checkout (CHECKOUT_TTL 24 h; Stripe's bound is 24 h).
    const expiresIn = Number(p.get('expires_at')) - Date.now() / 1000;
    expect(expiresIn).toBeGreaterThan(23 * 3600);
    expect(expiresIn).toBeLessThanOrEqual(24 * 3600);

    // Amounts a float would get wrong (0.57 × 100 = 56.999…), Stripe's smallest charge, and the largest top-up.
    for (const [amount, cents] of [
      ['0.57', '57'],
      [1.15, '115'],
      ['0.50', '50'],
      ['1.1', '110'],
      [5, '500'],
      ['10000.00', '1000000'],
    ] as const) {
      expect((await checkout(ws, amount)).request.params.get('line_items[0][price_data][unit_amount]'), String(amount)).toBe(cents);
    }
    // Below it: a 400 on the field, and nothing sent to Stripe.
    const sent = fake.requests.length;
    const small = await call('POST', '/v1/billing/checkout', { token: ws.token, body: { amount_usd: '0.49', idempotency_key: 'below-stripe-minimum' } });
    expectErrorBody(small, 400, 'invalid_request', 'amount_usd');
    expect(fake.requests.length).toBe(sent);
  });

  it('starts one session for concurrent retries of one idempotency key', async () => {
    const ws = await workspace();
    const body = { amount_usd: '7.50', idempotency_key: 'stripe-concurrent' };
    const responses = await Promise.all(Array.from({ length: 10 }, () => call('POST', '/v1/billing/checkout', { token: ws.token, body })));
    expect(responses.map((r) => r.status)).toEqual(Array(10).fill(201));
    expect(new Set(responses.map((r) => r.json.checkout_url)).size).toBe(1);
    expect(fake.of(responses[0].json.checkout_id)).toHaveLength(1);
  });

  it('answers 503 when Stripe refuses or does not answer in time, and a retry with the same key then works', async () => {
    const ws = await workspace();
    const body = { amount_usd: '3', idempotency_key: 'stripe-flaky' };
    fake.mode = 'fail';
    try {
      const refused = await call('POST', '/v1/billing/checkout', { token: ws.token, body });
      expectErrorBody(refused, 503, 'payment_provider_unavailable');
      expect(refused.headers.get('retry-after')).toBe('5');
      fake.mode = 'hang';
      const before = fake.requests.length;
      const started = Date.now();
      expectErrorBody(await call('POST', '/v1/billing/checkout', { token: ws.token, body }), 503, 'payment_provider_unavailable');
      expect(Date.now() - started).toBeLessThan(8000);
      // STRIPE_TIMEOUT (1 s) per attempt, one retry with the same Stripe idempotency key.
      const attempts = fake.requests.slice(before);
      expect(attempts).toHaveLength(2);
      expect(attempts[0].idempotencyKey).toBe(attempts[1].idempotencyKey);
    } finally {
      fake.mode = 'ok';
    }
    expect((await call('GET', '/v1/billing/topups', { token: ws.token })).json.data).toEqual([]);
    const retried = await call('POST', '/v1/billing/checkout', { token: ws.token, body });
    expect(retried.status, retried.text).toBe(201);
    expect(retried.json.checkout_url).toMatch(/^https:\/\/checkout\.stripe\.test\//);
  });
});

describe('the Stripe webhook', () => {
  it('credits a paid session exactly once: replays credit nothing, billing.topup.completed is emitted once', async () => {
    const ws = await workspace();
    const completed = bus.observe('billing.topup.completed');
    await bus.flush();
    const { checkout: created, sessionId } = await checkout(ws, '12.34');
    expect(await balanceOf(ws)).toBe('1.00');

    const payload = JSON.stringify(paidEvent(sessionId, { client_reference_id: created.checkout_id }));
    const delivered = await deliver(payload);
    expect(delivered.status, delivered.text).toBe(204);
    expect(delivered.text).toBe('');
    expect(await balanceOf(ws)).toBe('13.34');
    expect(await topupOf(ws, created.checkout_id)).toEqual({ ...created, status: 'completed', completed_at: expect.any(String) });

    // The same event again (Stripe retries), also signed anew, credits nothing.
    expect((await deliver(payload)).status).toBe(204);
    expect(
      (await deliver(payload, Stripe.webhooks.generateTestHeaderString({ payload, secret: webhookSecret, timestamp: Math.floor(Date.now() / 1000) - 5 })))
        .status,
    ).toBe(204);
    // Another event of the same session (a second delivery path) finds the checkout completed.
    expect((await deliver(JSON.stringify(stripeEvent('checkout.session.async_payment_succeeded', { id: sessionId })))).status).toBe(204);
    expect(await balanceOf(ws)).toBe('13.34');

    const mine = await eventually(() => completed.filter((e) => e.data.checkout_id === created.checkout_id).length > 0 && completed, 'billing.topup.completed');
    expect(mine.filter((e) => e.data.checkout_id === created.checkout_id)).toHaveLength(1);
    expect(mine.find((e) => e.data.checkout_id === created.checkout_id)?.data).toMatchObject({
      amount_usd: '12.34',
      balance_usd: '13.34',
      provider: 'stripe',
      workspace_id: ws.workspaceId,
    });
  });

  it('credits once for 10 concurrent deliveries of one event', async () => {
    const ws = await workspace();
    const { checkout: created, sessionId } = await checkout(ws, '20.05');
    const payload = JSON.stringify(paidEvent(sessionId));
    const responses = await Promise.all(Array.from({ length: 10 }, () => deliver(payload)));
    expect(responses.map((r) => r.status)).toEqual(Array(10).fill(204));
    expect(await balanceOf(ws)).toBe('21.05');
    expect((await topupOf(ws, created.checkout_id)).status).toBe('completed');
  });

  it('refuses missing, wrong, stale and tampered signatures with 400 invalid_signature, crediting nothing', async () => {
    const ws = await workspace();
    const { checkout: created, sessionId } = await checkout(ws, '50');
    const payload = JSON.stringify(paidEvent(sessionId));
    const now = Math.floor(Date.now() / 1000);
    const forged = [
      deliver(payload, ''),
      deliver(payload, Stripe.webhooks.generateTestHeaderString({ payload, secret: 'whsec_someone_else' })),
      deliver(payload, 't=abc,v1=00'),
      deliver(payload, `t=${now},v1=${'0'.repeat(64)}`),
      // Older than the tolerance (300 s): a captured delivery replayed later.
      deliver(payload, Stripe.webhooks.generateTestHeaderString({ payload, secret: webhookSecret, timestamp: now - 301 })),
      // A signed body changed afterwards: another amount / session / type, or one byte of whitespace.
      deliver(payload.replace(sessionId, 'cs_test_other'), Stripe.webhooks.generateTestHeaderString({ payload, secret: webhookSecret })),
      deliver(`${payload} `, Stripe.webhooks.generateTestHeaderString({ payload, secret: webhookSecret })),
    ];
    for (const response of await Promise.all(forged)) expectErrorBody(response, 400, 'invalid_signature', null);
    expect(await balanceOf(ws)).toBe('1.00');
    expect((await topupOf(ws, created.checkout_id)).status).toBe('pending');
    // The genuine event still credits afterwards.
    expect((await deliver(payload)).status).toBe(204);
    expect(await balanceOf(ws)).toBe('51.00');
  });

  it('ignores other event types and unpaid sessions, and credits a delayed payment when it succeeds', async () => {
    const ws = await workspace();
    const { checkout: created, sessionId } = await checkout(ws, '9.99');
    for (const type of ['payment_intent.succeeded', 'checkout.session.expired', 'customer.created', 'charge.refunded']) {
      const response = await deliver(JSON.stringify(stripeEvent(type, { id: sessionId })));
      expect(response.status, `${type}: ${response.text}`).toBe(204);
    }
    // A bank debit: the session completes unpaid, the payment succeeds later.
    expect((await deliver(JSON.stringify(paidEvent(sessionId, { payment_status: 'unpaid' })))).status).toBe(204);
    expect(await balanceOf(ws)).toBe('1.00');
    expect((await topupOf(ws, created.checkout_id)).status).toBe('pending');
    expect((await deliver(JSON.stringify(stripeEvent('checkout.session.async_payment_succeeded', { id: sessionId })))).status).toBe(204);
    expect(await balanceOf(ws)).toBe('10.99');
  });

  it('answers 204 for a paid session of no checkout of ours, with a warning', async () => {
    const event = paidEvent('cs_test_not_ours');
    expect((await deliver(JSON.stringify(event))).status).toBe(204);
    await eventually(() => mesh.output('billing').includes(event.id) && mesh.output('billing').includes('no checkout of ours'), 'the warning');
  });

  it('credits a paid session whose checkout reads expired by the time the event arrives', async () => {
    const ws = await workspace();
    const { checkout: created, sessionId } = await checkout(ws, '4');
    await db('checkouts')
      .where({ id: created.checkout_id })
      .update({ expires_at: db.raw("now() - interval '1 minute'") });
    expect((await topupOf(ws, created.checkout_id)).status).toBe('expired');
    expect((await deliver(JSON.stringify(paidEvent(sessionId)))).status).toBe(204);
    expect((await topupOf(ws, created.checkout_id)).status).toBe('completed');
    expect(await balanceOf(ws)).toBe('5.00');
  });
});

describe('configuration', () => {
  it('refuses to start with STRIPE_SECRET_KEY but no STRIPE_WEBHOOK_SECRET', async () => {
    const main = fileURLToPath(new URL('../../services/billing/dist/src/main.js', import.meta.url));
    const child = spawn(process.execPath, [main], {
      env: { ...process.env, ...mesh.env, STRIPE_WEBHOOK_SECRET: '', PORT: String(await freePort()) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(1);
    expect(output).toContain('STRIPE_WEBHOOK_SECRET is required when STRIPE_SECRET_KEY is set');
  });
});
