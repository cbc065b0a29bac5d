import { renderSetupPage } from '@switchboard/billing/sandbox-setup-page';
import type { SetupRow } from '@switchboard/billing/store/payment-methods';
import { createDb, type Knex } from '@switchboard/runtime/db';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { eventually } from '@switchboard/runtime/testing';
import { launchChromium, openPage } from '@switchboard/testkit/browser';
import { EventBus } from '@switchboard/testkit/events';
import { deliver, FakeStripe } from '@switchboard/testkit/fake-stripe';
import { bootMesh, expectErrorBody, type RestCall, restClient, signUp } from '@switchboard/testkit/mesh';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Saved payment methods through their real path (docs/api/billing.md#payment-methods): REST → gateway → billing, with Stripe
 * as a local fake (the real `stripe` client, STRIPE_API_BASE) in one mesh and the built-in
 * sandbox in another. A setup saves one card however often its completion is delivered; the
 * newest card is the default; removing one detaches it at Stripe first.
 */

let stripeMesh: Mesh;
let sandboxMesh: Mesh;
let stripeCall: RestCall;
let sandboxCall: RestCall;
let fake: FakeStripe;
let bus: EventBus;
let db: Knex;

beforeAll(async () => {
  fake = await FakeStripe.start();
  [stripeMesh, sandboxMesh] = await Promise.all([bootMesh(fake.env()), bootMesh()]);
  stripeCall = restClient(stripeMesh.gatewayUrl);
  sandboxCall = restClient(sandboxMesh.gatewayUrl);
  bus = await EventBus.connect();
  db = createDb(sandboxMesh.env.DATABASE_URL, 'billing', 2);
});

afterAll(async () => {
  await db?.destroy();
  await bus?.close();
  await Promise.all([stripeMesh?.stop(), sandboxMesh?.stop()]);
  await fake?.close();
});

interface Workspace {
  token: string;
  workspaceId: string;
}

const workspace = (call: RestCall): Promise<Workspace> => signUp(call);

async function startSetup(call: RestCall, ws: Workspace) {
  const created = await call('POST', '/v1/billing/payment-methods/setup', { token: ws.token, body: {} });
  expect(created.status, created.text).toBe(201);
  expect(created.json).toMatchObject({
    setup_id: expect.stringMatching(/^pms_[A-Za-z0-9]{22}$/),
    setup_url: expect.any(String),
    expires_at: expect.any(String),
  });
  return created.json as { setup_id: string; setup_url: string; expires_at: string };
}

async function methodsOf(call: RestCall, ws: Workspace) {
  const listed = await call('GET', '/v1/billing/payment-methods', { token: ws.token });
  expect(listed.status, listed.text).toBe(200);
  return listed.json.data as Array<{ payment_method_id: string; brand: string; last4: string; default: boolean; exp_month: number; exp_year: number }>;
}

/** The Stripe session a setup opened (its setup_url names it). */
function sessionOf(setupUrl: string): string {
  const id = setupUrl.split('/').pop();
  if (!id || !fake.sessions.has(id)) throw new Error(`no fake session behind ${setupUrl}`);
  return id;
}

/** Saves a card with Stripe: setup, the payer completes the session, Stripe's event arrives. */
async function saveStripeCard(ws: Workspace, card: '4242' | '0341' = '4242') {
  const setup = await startSetup(stripeCall, ws);
  const sessionId = sessionOf(setup.setup_url);
  const delivery = fake.completeSession(sessionId, { card });
  const delivered = await deliver(stripeMesh.gatewayUrl, delivery);
  expect(delivered.status, delivered.text).toBe(204);
  return { setup, sessionId, delivery };
}

describe('saving a card with Stripe', () => {
  it('creates one Customer per workspace and a setup-mode Checkout Session for it', async () => {
    const ws = await workspace(stripeCall);
    const first = await startSetup(stripeCall, ws);
    const second = await startSetup(stripeCall, ws);
    const customers = fake.requests.filter((r) => r.path === '/v1/customers' && r.params.get('metadata[workspace_id]') === ws.workspaceId);
    expect(customers).toHaveLength(1);
    expect(customers[0].idempotencyKey).toBe(`customer-${ws.workspaceId}`);
    const customerId = customers[0].objectId;

    for (const setup of [first, second]) {
      expect(setup.setup_url).toMatch(/^https:\/\/checkout\.stripe\.test\/c\/pay\/cs_test_/);
      const [request] = fake.requests.filter((r) => r.path === '/v1/checkout/sessions' && r.params.get('client_reference_id') === setup.setup_id);
      expect(request.idempotencyKey).toBe(setup.setup_id);
      expect(request.params.get('mode')).toBe('setup');
      expect(request.params.get('customer')).toBe(customerId);
      expect(request.params.get('metadata[setup_id]')).toBe(setup.setup_id);
      expect(request.params.get('metadata[workspace_id]')).toBe(ws.workspaceId);
      expect(request.params.get('success_url')).toContain(`setup_id=${setup.setup_id}`);
    }
    // The sandbox's pages do not exist where Stripe takes the payments.
    expectErrorBody(await stripeCall('GET', '/v1/billing/sandbox/setup/anything'), 404, 'setup_not_found');
  });

  it('saves the card of a completed session once, whatever is redelivered, and it is the default', async () => {
    const ws = await workspace(stripeCall);
    const saved = bus.observe('billing.payment_method.saved');
    await bus.flush();
    expect(await methodsOf(stripeCall, ws)).toEqual([]);
    const setup = await startSetup(stripeCall, ws);
    const delivery = fake.completeSession(sessionOf(setup.setup_url));
    const responses = await Promise.all(Array.from({ length: 5 }, () => deliver(stripeMesh.gatewayUrl, delivery)));
    expect(responses.map((r) => r.status)).toEqual(Array(5).fill(204));
    expect((await deliver(stripeMesh.gatewayUrl, fake.completeSession(sessionOf(setup.setup_url)))).status).toBe(204);

    const methods = await methodsOf(stripeCall, ws);
    expect(methods).toEqual([
      {
        payment_method_id: expect.stringMatching(/^pm_[A-Za-z0-9]{22}$/),
        brand: 'visa',
        last4: '4242',
        exp_month: 12,
        exp_year: new Date().getUTCFullYear() + 3,
        default: true,
        created_at: expect.any(String),
      },
    ]);
    // The card was read from Stripe: the session's SetupIntent, then its PaymentMethod.
    expect(fake.requests.some((r) => r.method === 'GET' && r.path.startsWith('/v1/setup_intents/'))).toBe(true);
    const mine = await eventually(() => {
      const events = saved.filter((e) => e.data.workspace_id === ws.workspaceId);
      return events.length > 0 && events;
    }, 'billing.payment_method.saved');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(saved.filter((e) => e.data.workspace_id === ws.workspaceId)).toHaveLength(1);
    expect(mine[0].data).toMatchObject({ payment_method_id: methods[0].payment_method_id, brand: 'visa', last4: '4242' });
  });

  it('lists the newest card first as the default', async () => {
    const ws = await workspace(stripeCall);
    await saveStripeCard(ws, '4242');
    await saveStripeCard(ws, '0341');
    const methods = await methodsOf(stripeCall, ws);
    expect(methods.map((m) => [m.last4, m.default])).toEqual([
      ['0341', true],
      ['4242', false],
    ]);
  });

  it('removes a card by detaching it at Stripe; Stripe failing removes nothing (503)', async () => {
    const ws = await workspace(stripeCall);
    const { sessionId } = await saveStripeCard(ws);
    const [method] = await methodsOf(stripeCall, ws);
    const stripeMethod = fake.paymentMethodOf(sessionId);
    if (!stripeMethod) throw new Error('no Stripe payment method');
    expect(fake.attached(stripeMethod)).toBe(true);

    fake.mode = 'fail';
    try {
      const refused = await stripeCall('DELETE', `/v1/billing/payment-methods/${method.payment_method_id}`, { token: ws.token });
      expectErrorBody(refused, 503, 'payment_provider_unavailable');
      expect(refused.headers.get('retry-after')).toBe('5');
    } finally {
      fake.mode = 'ok';
    }
    expect(await methodsOf(stripeCall, ws)).toHaveLength(1);

    const removed = bus.observe('billing.payment_method.removed');
    await bus.flush();
    const deleted = await stripeCall('DELETE', `/v1/billing/payment-methods/${method.payment_method_id}`, { token: ws.token });
    expect(deleted.status, deleted.text).toBe(204);
    expect(fake.attached(stripeMethod)).toBe(false);
    expect(await methodsOf(stripeCall, ws)).toEqual([]);
    expectErrorBody(
      await stripeCall('DELETE', `/v1/billing/payment-methods/${method.payment_method_id}`, { token: ws.token }),
      404,
      'payment_method_not_found',
    );
    const mine = await eventually(() => removed.find((e) => e.data.payment_method_id === method.payment_method_id), 'billing.payment_method.removed');
    expect(mine.data).toMatchObject({ workspace_id: ws.workspaceId, removed_by: expect.any(String) });
  });

  it('answers 503 payment_provider_unavailable when Stripe does not answer a setup in time', async () => {
    const ws = await workspace(stripeCall);
    fake.mode = 'hang';
    try {
      const started = Date.now();
      expectErrorBody(await stripeCall('POST', '/v1/billing/payment-methods/setup', { token: ws.token, body: {} }), 503, 'payment_provider_unavailable');
      expect(Date.now() - started).toBeLessThan(8000);
    } finally {
      fake.mode = 'ok';
    }
    await startSetup(stripeCall, ws);
  });

  it('a method of another workspace is not found', async () => {
    const owner = await workspace(stripeCall);
    const other = await workspace(stripeCall);
    await saveStripeCard(owner);
    const [method] = await methodsOf(stripeCall, owner);
    expectErrorBody(
      await stripeCall('DELETE', `/v1/billing/payment-methods/${method.payment_method_id}`, { token: other.token }),
      404,
      'payment_method_not_found',
    );
    expect(await methodsOf(stripeCall, owner)).toHaveLength(1);
  });
});

describe('saving a sandbox test card', () => {
  const pathOf = (url: string) => new URL(url).pathname;

  it('shows a page with the test cards, saves the chosen one once, and answers it again', async () => {
    const ws = await workspace(sandboxCall);
    const setup = await startSetup(sandboxCall, ws);
    expect(setup.setup_url).toMatch(new RegExp(`^${sandboxMesh.env.PUBLIC_BASE_URL}/v1/billing/sandbox/setup/[\\w-]{20,}$`));

    const page = await sandboxCall('GET', pathOf(setup.setup_url));
    expect(page.status, page.text).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const nonce = /script-src 'nonce-([^']+)'/.exec(page.headers.get('content-security-policy') ?? '')?.[1];
    expect(nonce).toBeTruthy();
    expect(page.text).toContain(`<code>${setup.setup_id}</code>`);
    expect(page.text).toContain('data-card="4242"');
    expect(page.text).toContain('data-card="0341"');
    expect(page.text.match(/<script\b[^>]*>/g)).toEqual([`<script nonce="${nonce}">`]);
    expect(page.text).not.toMatch(/\s(on\w+|style)=/i);

    expectErrorBody(await sandboxCall('POST', `${pathOf(setup.setup_url)}/complete`, { body: { card: '1234' } }), 400, 'invalid_request', 'card');
    const saved = await sandboxCall('POST', `${pathOf(setup.setup_url)}/complete`, { body: { card: '0341' } });
    expect(saved.status, saved.text).toBe(200);
    expect(saved.json).toMatchObject({ payment_method_id: expect.stringMatching(/^pm_/), brand: 'visa', last4: '0341', default: true });
    const again = await Promise.all(Array.from({ length: 5 }, () => sandboxCall('POST', `${pathOf(setup.setup_url)}/complete`, { body: { card: '4242' } })));
    for (const answer of again) expect(answer.json, answer.text).toEqual(saved.json);
    expect(await methodsOf(sandboxCall, ws)).toEqual([saved.json]);

    const completedPage = await sandboxCall('GET', pathOf(setup.setup_url));
    expect(completedPage.text).toContain('status-completed');
    expect(completedPage.text).not.toContain('data-card=');

    // The default card (no body) is 4242; the newest card is the default.
    const next = await startSetup(sandboxCall, ws);
    const plain = await sandboxCall('POST', `${pathOf(next.setup_url)}/complete`);
    expect(plain.status, plain.text).toBe(200);
    expect(plain.json).toMatchObject({ last4: '4242', default: true });
    expect((await methodsOf(sandboxCall, ws)).map((m) => [m.last4, m.default])).toEqual([
      ['4242', true],
      ['0341', false],
    ]);

    const deleted = await sandboxCall('DELETE', `/v1/billing/payment-methods/${plain.json.payment_method_id}`, { token: ws.token });
    expect(deleted.status, deleted.text).toBe(204);
    expect((await methodsOf(sandboxCall, ws)).map((m) => [m.last4, m.default])).toEqual([['0341', true]]);
  });

  it('pages the list like every list: limit, has_more and next_cursor; a limit outside 1..100 is 400 naming it', async () => {
    const ws = await workspace(sandboxCall);
    const saved: string[] = [];
    for (const card of ['4242', '0341', '4242']) {
      const setup = await startSetup(sandboxCall, ws);
      const completed = await sandboxCall('POST', `${pathOf(setup.setup_url)}/complete`, { body: { card } });
      expect(completed.status, completed.text).toBe(200);
      saved.unshift(completed.json.payment_method_id);
    }
    const all = await sandboxCall('GET', '/v1/billing/payment-methods', { token: ws.token });
    expect(all.json).toMatchObject({ has_more: false, next_cursor: null });
    expect(all.json.data.map((m: { payment_method_id: string }) => m.payment_method_id)).toEqual(saved);

    const first = await sandboxCall('GET', '/v1/billing/payment-methods?limit=2', { token: ws.token });
    expect(first.status, first.text).toBe(200);
    expect(first.json.data.map((m: { payment_method_id: string; default: boolean }) => [m.payment_method_id, m.default])).toEqual([
      [saved[0], true],
      [saved[1], false],
    ]);
    expect(first.json).toMatchObject({ has_more: true, next_cursor: expect.any(String) });
    const second = await sandboxCall('GET', `/v1/billing/payment-methods?limit=2&after=${encodeURIComponent(first.json.next_cursor)}`, { token: ws.token });
    expect(second.status, second.text).toBe(200);
    expect(second.json.data.map((m: { payment_method_id: string; default: boolean }) => [m.payment_method_id, m.default])).toEqual([[saved[2], false]]);
    expect(second.json).toMatchObject({ has_more: false, next_cursor: null });

    for (const limit of ['0', '101']) {
      expectErrorBody(await sandboxCall('GET', `/v1/billing/payment-methods?limit=${limit}`, { token: ws.token }), 400, 'invalid_request', 'limit');
    }
    expectErrorBody(await sandboxCall('GET', '/v1/billing/payment-methods?after=nope', { token: ws.token }), 400, 'invalid_request', 'after');
  });

  it('answers 404 setup_not_found to an unknown token and 409 setup_expired past the page expiry', async () => {
    const ws = await workspace(sandboxCall);
    expectErrorBody(await sandboxCall('GET', '/v1/billing/sandbox/setup/not-a-token'), 404, 'setup_not_found');
    expectErrorBody(await sandboxCall('POST', '/v1/billing/sandbox/setup/not-a-token/complete', { body: {} }), 404, 'setup_not_found');
    const setup = await startSetup(sandboxCall, ws);
    await db('payment_method_setups')
      .where({ id: setup.setup_id })
      .update({ expires_at: db.raw("now() - interval '1 minute'") });
    expect((await sandboxCall('GET', pathOf(setup.setup_url))).text).toContain('status-expired');
    expectErrorBody(await sandboxCall('POST', `${pathOf(setup.setup_url)}/complete`, { body: {} }), 409, 'setup_expired');
    expect(await methodsOf(sandboxCall, ws)).toEqual([]);
  });
});

describe('the sandbox setup page', () => {
  let browser: Browser;

  beforeAll(async () => {
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
  });

  it('saves the card of the button clicked, without a CSP violation', async () => {
    const ws = await workspace(sandboxCall);
    const setup = await startSetup(sandboxCall, ws);
    const context = await browser.newContext();
    try {
      const { page, problems } = await openPage(context);
      const opened = await page.goto(setup.setup_url);
      expect(opened?.status()).toBe(200);
      expect(await page.locator('#status').textContent()).toBe('pending');
      const completion = page.waitForRequest((request) => request.method() === 'POST' && request.url().endsWith('/complete'));
      await page.locator('form[data-card="0341"] button').click();
      expect((await completion).resourceType()).toBe('fetch');
      await page.locator('#status', { hasText: 'completed' }).waitFor({ timeout: 10_000 });
      expect(await page.locator('#message').textContent()).toBe('Saved: visa ending in 0341.');

      // The default card's button: one request, by the script.
      const next = await startSetup(sandboxCall, ws);
      const posts: string[] = [];
      page.on('request', (request) => {
        if (request.method() === 'POST') posts.push(request.resourceType());
      });
      await page.goto(next.setup_url);
      await page.locator('form[data-card="4242"] button').click();
      await page.locator('#status', { hasText: 'completed' }).waitFor({ timeout: 10_000 });
      expect(await page.locator('#message').textContent()).toBe('Saved: visa ending in 4242.');
      expect(posts).toEqual(['fetch']);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
    expect((await methodsOf(sandboxCall, ws)).map((m) => m.last4)).toEqual(['4242', '0341']);
  });

  it('escapes everything it puts into the HTML', () => {
    const evil = '"><script>alert(1)</script><img src=x onerror=alert(2)>';
    const row: SetupRow = {
      id: `pms_${evil}`,
      workspace_id: `org_${evil}`,
      provider: 'sandbox',
      status: 'pending',
      setup_url: null,
      token_key_id: null,
      provider_session_id: null,
      payment_method_id: null,
      created_by: null,
      created_at: new Date('2026-01-01T00:00:00Z'),
      expires_at: new Date('2026-01-02T00:00:00Z'),
      completed_at: null,
    };
    const html = renderSetupPage(row, `tok'${evil}`, `n0nce${evil}`);
    expect(html).not.toContain(evil);
    expect(html).not.toContain('<img');
    expect(html).not.toContain('<script>');
    expect(html.match(/<script\b[^>]*>/g)).toHaveLength(1);
  });
});
