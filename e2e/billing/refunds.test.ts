import { randomBytes } from 'node:crypto';
import { createDb, type Knex } from '@switchboard/runtime/db';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { Money } from '@switchboard/runtime/money';
import { eventually } from '@switchboard/runtime/testing';
import { EventBus } from '@switchboard/testkit/events';
import { type Delivery, deliver, FakeStripe } from '@switchboard/testkit/fake-stripe';
import { bootMesh, expectErrorBody, type RestCall, restClient, signUp } from '@switchboard/testkit/mesh';
import { catalogModel, type TestCatalog, writeTestCatalog } from '@switchboard/testkit/model-catalog-file';
import { EventTap } from '@switchboard/testkit/webhook-receiver';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Refunds and lost disputes through the real path (docs/api/billing.md#refunds-and-disputes): a Stripe top-up is paid and
 * credited, then Stripe reports money taken back (`charge.refunded` with the cumulative refunded
 * amount, `charge.dispute.closed` lost). The balance is debited by exactly what is new, once,
 * whatever is replayed, redelivered concurrently or delivered out of order, and it may go below
 * zero, which blocks the workspace's keys at the front door (a local OpenAI-compatible upstream).
 */

/**
 * Short, so that a balance lease the data plane was granted before a refund runs out soon
 * after it (docs/money-path.md#leases): the refused request is awaited within twice this.
 */
const leaseTtlMs = 2000;

let mesh: Mesh;
let call: RestCall;
let fake: FakeStripe;
let bus: EventBus;
let db: Knex;
let upstream: OpenAiUpstream;
let catalog: TestCatalog | undefined;
let tap: EventTap;

beforeAll(async () => {
  fake = await FakeStripe.start();
  tap = await EventTap.start();
  upstream = await OpenAiUpstream.start();
  catalog = await writeTestCatalog({ overseas: upstream }, [catalogModel(`refund-fast-${randomBytes(3).toString('hex')}`, 'overseas', ['fast'])]);
  mesh = await bootMesh({ ...fake.env(), ...tap.env(), ...catalog.env, LEASE_TTL: `${leaseTtlMs}ms` });
  call = restClient(mesh.gatewayUrl);
  bus = await EventBus.connect();
  db = createDb(mesh.env.DATABASE_URL, 'billing', 2);
});

afterAll(async () => {
  await db?.destroy();
  await bus?.close();
  await mesh?.stop();
  await fake?.close();
  await upstream?.close();
  await catalog?.remove();
  await tap?.close();
});

interface Workspace {
  token: string;
  workspaceId: string;
}

const workspace = (): Promise<Workspace> => signUp(call);

async function balanceOf(ws: Workspace): Promise<Money> {
  const balance = await call('GET', '/v1/billing/balance', { token: ws.token });
  expect(balance.status, balance.text).toBe(200);
  return new Money(balance.json.balance_usd);
}

const send = (delivery: Delivery) => deliver(mesh.gatewayUrl, delivery);

let keys = 0;
/** A Stripe top-up the payer paid; `credit: false` leaves Stripe's event undelivered. */
async function paidTopup(ws: Workspace, amount: string, options: { credit?: boolean } = {}) {
  keys += 1;
  const created = await call('POST', '/v1/billing/checkout', { token: ws.token, body: { amount_usd: amount, idempotency_key: `refund-${keys}` } });
  expect(created.status, created.text).toBe(201);
  const sessionId = fake.of(created.json.checkout_id)[0].objectId as string;
  const completed = fake.completeSession(sessionId);
  const paymentIntent = fake.sessions.get(sessionId)?.payment_intent;
  if (!paymentIntent) throw new Error('the fake session has no payment intent');
  if (options.credit !== false) expect((await send(completed)).status).toBe(204);
  return { checkoutId: created.json.checkout_id as string, paymentIntent, completed };
}

describe('refunds', () => {
  it('debits each refunded amount once: replays and older cumulative amounts debit nothing', async () => {
    const ws = await workspace();
    const recorded = bus.observe('billing.refund.recorded');
    const endpoint = await tap.subscribe(call, ws, ['billing.refund.recorded']);
    await bus.flush();
    const start = await balanceOf(ws);
    const { paymentIntent, checkoutId } = await paidTopup(ws, '20.00');
    expect((await balanceOf(ws)).minus(start).toFixed(2)).toBe('20.00');

    const partial = fake.refund(paymentIntent, 550); // 5.50 refunded so far
    const responses = await Promise.all(Array.from({ length: 5 }, () => send(partial)));
    expect(responses.map((r) => r.status)).toEqual(Array(5).fill(204));
    expect((await balanceOf(ws)).minus(start).toFixed(2)).toBe('14.50');

    const rest = fake.refund(paymentIntent); // all 20.00 refunded
    expect((await send(rest)).status).toBe(204);
    // The older partial event again, after the later one: nothing more.
    expect((await send(partial)).status).toBe(204);
    expect((await send(rest)).status).toBe(204);
    expect((await balanceOf(ws)).minus(start).toFixed(2)).toBe('0.00');

    const mine = await eventually(() => {
      const events = recorded.filter((e) => e.data.workspace_id === ws.workspaceId);
      return events.length >= 2 && events;
    }, 'billing.refund.recorded');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(recorded.filter((e) => e.data.workspace_id === ws.workspaceId)).toHaveLength(2);
    expect(mine.map((e) => e.data.amount_usd)).toEqual(['5.50', '14.50']);
    expect(mine[0].data).toMatchObject({ topup_id: checkoutId, provider_charge_id: expect.stringMatching(/^ch_/) });
    expect(new Money(String(mine[1].data.balance_usd)).eq(start)).toBe(true);
    // Both ledger entries reference the charge refunded (docs/api/billing.md#ledger).
    const ledger = await call('GET', '/v1/billing/ledger', { token: ws.token });
    expect(
      ledger.json.data.filter((e: { type: string }) => e.type === 'refund').map((e: { amount_usd: string; reference: string }) => [e.amount_usd, e.reference]),
    ).toEqual([
      ['-14.50', mine[0].data.provider_charge_id],
      ['-5.50', mine[0].data.provider_charge_id],
    ]);
    // Delivered to the workspace's endpoint too, each refund once.
    await endpoint.delivered('billing.refund.recorded', (payload) => payload.data.amount_usd === '14.50');
    expect(endpoint.all('billing.refund.recorded').map((payload) => payload.data.amount_usd)).toEqual(['5.50', '14.50']);
  });

  it('takes the balance below zero when the credit was spent, and the front door then refuses the workspace 402 insufficient_balance', async () => {
    const ws = await workspace();
    const key = await call('POST', '/v1/keys', { token: ws.token, body: { name: 'refunded' } });
    expect(key.status, key.text).toBe(201);
    const client = new OpenAI({ apiKey: key.json.full_key, baseURL: `${mesh.gatewayUrl}/v1`, maxRetries: 0 });
    const ask = () => client.chat.completions.create({ model: 'service/fast', messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 8 });
    const { paymentIntent } = await paidTopup(ws, '10');
    await ask(); // served while the balance covers it

    // The credit spent (but 2.00 of it), then refunded in full.
    await db('accounts').where({ workspace_id: ws.workspaceId }).update({ balance_usd: '2.00' });
    expect((await send(fake.refund(paymentIntent))).status).toBe(204);
    expect((await balanceOf(ws)).toFixed(2)).toBe('-8.00');

    // A balance lease granted before the refund may serve until it runs out or expires.
    const refused = await eventually(
      () =>
        ask().then(
          () => undefined,
          (err: unknown) => err instanceof OpenAI.APIError && err.status === 402 && err,
        ),
      '402 insufficient_balance',
      2 * leaseTtlMs + 5000,
    );
    expect(refused.code).toBe('insufficient_balance');
    expect(new Money((refused.error as { metadata: { balance_usd: string } }).metadata.balance_usd).lt(0)).toBe(true);
    // Blocked before the upstream.
    const upstreamCalls = upstream.requests.length;
    await expect(ask()).rejects.toMatchObject({ status: 402, code: 'insufficient_balance' });
    expect(upstream.requests.length).toBe(upstreamCalls);
  });

  it('answers 503 to a refund of a payment not recorded yet, and debits it once the payment is credited', async () => {
    const ws = await workspace();
    const start = await balanceOf(ws);
    const { paymentIntent, completed } = await paidTopup(ws, '7.25', { credit: false });
    const refund = fake.refund(paymentIntent, 225);
    const early = await send(refund);
    expect(early.status, early.text).toBe(503);
    expect(JSON.parse(early.text).error.code).toBe('payment_not_recorded');
    expect((await balanceOf(ws)).eq(start)).toBe(true);

    expect((await send(completed)).status).toBe(204);
    expect((await send(refund)).status).toBe(204);
    expect((await balanceOf(ws)).minus(start).toFixed(2)).toBe('5.00');
  });

  it('ignores refunds of charges without a payment of ours and refuses forged ones', async () => {
    const ws = await workspace();
    const { paymentIntent } = await paidTopup(ws, '3');
    const before = await balanceOf(ws);
    const forged = fake.refund(paymentIntent);
    expectErrorBody(
      await call('POST', '/v1/billing/providers/stripe/webhook', { rawBody: forged.body, headers: { 'stripe-signature': 't=1,v1=00' } }),
      400,
      'invalid_signature',
      null,
    );
    expect((await send(fake.delivery('charge.refunded', { id: 'ch_test_none', object: 'charge', amount_refunded: 100 }))).status).toBe(204);
    expect((await balanceOf(ws)).eq(before)).toBe(true);
  });
});

describe('lost disputes', () => {
  it('debits a lost dispute once, however often it is delivered; a won one debits nothing', async () => {
    const ws = await workspace();
    const lost = bus.observe('billing.dispute.lost');
    const endpoint = await tap.subscribe(call, ws, ['billing.dispute.lost']);
    await bus.flush();
    const start = await balanceOf(ws);
    const { paymentIntent } = await paidTopup(ws, '12.34');
    const dispute = fake.loseDispute(paymentIntent);
    const responses = await Promise.all(Array.from({ length: 10 }, () => send(dispute)));
    expect(responses.map((r) => r.status)).toEqual(Array(10).fill(204));
    expect((await send(dispute)).status).toBe(204);
    expect((await balanceOf(ws)).minus(start).toFixed(2)).toBe('0.00');

    const won = JSON.parse(fake.loseDispute(paymentIntent, 500).body).data.object;
    expect((await send(fake.delivery('charge.dispute.closed', { ...won, status: 'won' }))).status).toBe(204);
    expect((await balanceOf(ws)).minus(start).toFixed(2)).toBe('0.00');
    // Another lost dispute of the same payment: nothing of it is left to take back.
    expect((await send(fake.loseDispute(paymentIntent))).status).toBe(204);
    expect((await balanceOf(ws)).minus(start).toFixed(2)).toBe('0.00');

    const disputeId = JSON.parse(dispute.body).data.object.id;
    const mine = await eventually(() => lost.find((e) => e.data.dispute_id === disputeId), 'billing.dispute.lost');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(lost.filter((e) => e.data.workspace_id === ws.workspaceId)).toHaveLength(1);
    expect(mine.data).toMatchObject({ workspace_id: ws.workspaceId, amount_usd: '12.34', provider_charge_id: expect.stringMatching(/^ch_/) });
    expect((await endpoint.delivered('billing.dispute.lost')).data).toEqual(mine.data);
  });
});
