import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';

/**
 * A local stand-in of the parts of Stripe's REST API the billing service calls (docs/api/billing.md#stripe-checkout), so the
 * tests take the product's real path (the `stripe` client, STRIPE_API_BASE) without the network:
 * customers, Checkout Sessions (payment and setup mode), SetupIntents, PaymentMethods (read,
 * detach) and off-session PaymentIntents. Parameters come in form-encoded, objects go out as
 * Stripe's JSON; one Idempotency-Key answers the same response again, as Stripe does.
 *
 * The events Stripe would send afterwards are made by the test (`completeSession`, `refund`, …)
 * and delivered with `deliver`, signed the way the library's own test helper signs them.
 *
 * Test cards: "4242" (the default) pays; "0341" saves fine, but a PaymentIntent charged to it is
 * declined (402 card_error, decline_code card_declined), like Stripe's 4000 0000 0000 0341.
 */

export interface Delivery {
  body: string;
  signature: string;
  eventId: string;
}

interface FakeRequest {
  method: string;
  path: string;
  idempotencyKey?: string;
  params: URLSearchParams;
  /** The Authorization header (the secret key). */
  authorization?: string;
  /** The id of the object the request created or answered, once it did. */
  objectId?: string;
}

interface FakePaymentIntent {
  id: string;
  amount: number;
  customer: string;
  payment_method: string;
  metadata: Record<string, string>;
  status: string;
}

interface Session {
  id: string;
  mode: string;
  customer: string | null;
  client_reference_id: string | null;
  metadata: Record<string, string>;
  paymentIntentMetadata: Record<string, string>;
  amount_total: number | null;
  params: URLSearchParams;
  payment_intent: string | null;
  setup_intent: string | null;
  completed?: Delivery;
}

interface Card {
  id: string;
  last4: string;
  customer: string | null;
}

type Answer = { status: number; json: unknown };

const webhookPath = '/v1/billing/providers/stripe/webhook';

/** The `metadata[...]` entries of form-encoded params (under `prefix`, e.g. `payment_intent_data[metadata]`). */
function metadataOf(params: URLSearchParams, prefix = 'metadata'): Record<string, string> {
  const metadata: Record<string, string> = {};
  for (const [key, value] of params) {
    if (key.startsWith(`${prefix}[`) && key.endsWith(']')) metadata[key.slice(prefix.length + 1, -1)] = value;
  }
  return metadata;
}

function stripeError(status: number, type: string, message: string, extra: Record<string, unknown> = {}): Answer {
  return { status, json: { error: { type, message, ...extra } } };
}

export class FakeStripe {
  readonly webhookSecret = `whsec_test_${randomBytes(12).toString('hex')}`;
  readonly secretKey = 'sk_test_switchboard_fake';
  mode: 'ok' | 'fail' | 'hang' | 'commit-then-hang' = 'ok';
  readonly requests: FakeRequest[] = [];
  readonly paymentIntents = new Map<string, FakePaymentIntent>();
  readonly customers = new Map<string, { id: string; metadata: Record<string, string> }>();
  readonly sessions = new Map<string, Session>();
  private readonly cards = new Map<string, Card>();
  private readonly setupIntents = new Map<string, { id: string; customer: string | null; payment_method: string; metadata: Record<string, string> }>();
  /** charge id → its PaymentIntent; and what was refunded of it (cents). */
  private readonly charges = new Map<string, { paymentIntent: string; refunded: number }>();
  private readonly disputes = new Map<string, string>();
  private readonly byKey = new Map<string, Answer>();
  private counter = 0;
  private readonly server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => this.answer(req, res, body));
  });

  private constructor(readonly url: string) {}

  /** A fake listening on 127.0.0.1 at a free port. */
  static async start(): Promise<FakeStripe> {
    const fake = new FakeStripe('');
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    (fake as { url: string }).url = `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}`;
    return fake;
  }

  /** The billing settings that point the service at this fake. */
  env(): Record<string, string> {
    return {
      STRIPE_SECRET_KEY: this.secretKey,
      STRIPE_WEBHOOK_SECRET: this.webhookSecret,
      STRIPE_API_BASE: this.url,
      STRIPE_TIMEOUT: '1s',
      STRIPE_SUPPRESS_NOTICES: 'true',
    };
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** The `POST /v1/checkout/sessions` requests of one checkout (its client_reference_id). */
  of(checkoutId: string): FakeRequest[] {
    return this.requests.filter((r) => r.path === '/v1/checkout/sessions' && r.params.get('client_reference_id') === checkoutId);
  }

  /** The payment method a saved card became (its `pm_…` id at Stripe), by the setup session. */
  paymentMethodOf(sessionId: string): string | undefined {
    const session = this.sessions.get(sessionId);
    return session?.setup_intent ? this.setupIntents.get(session.setup_intent)?.payment_method : undefined;
  }

  /** Whether Stripe still holds the payment method attached to a customer. */
  attached(paymentMethodId: string): boolean {
    return Boolean(this.cards.get(paymentMethodId)?.customer);
  }

  /**
   * The payer finishes the session: a payment session is paid with a new PaymentIntent (its
   * `payment_intent`), a setup session saves the card to the session's customer. The same
   * session completed again answers the same event.
   */
  completeSession(sessionId: string, options: { card?: '4242' | '0341' } = {}): Delivery {
    const session = this.sessions.get(sessionId);
    if (!session) throw new Error(`no session ${sessionId}`);
    if (session.completed) return this.resign(session.completed);
    const card = this.card(options.card ?? '4242', session.customer);
    if (session.mode === 'setup') {
      const setupIntent = { id: this.id('seti'), customer: session.customer, payment_method: card.id, metadata: session.metadata };
      this.setupIntents.set(setupIntent.id, setupIntent);
      session.setup_intent = setupIntent.id;
    } else {
      const intent = this.paymentIntent({
        amount: session.amount_total ?? 0,
        customer: session.customer ?? '',
        payment_method: card.id,
        metadata: session.paymentIntentMetadata,
        status: 'succeeded',
      });
      session.payment_intent = intent.id;
    }
    session.completed = this.delivery('checkout.session.completed', this.sessionJson(session));
    return session.completed;
  }

  /** `payment_intent.succeeded` or `payment_intent.payment_failed`, per the PaymentIntent's status. */
  paymentIntentEvent(paymentIntentId: string): Delivery {
    const intent = this.paymentIntents.get(paymentIntentId);
    if (!intent) throw new Error(`no payment intent ${paymentIntentId}`);
    const type = intent.status === 'succeeded' ? 'payment_intent.succeeded' : 'payment_intent.payment_failed';
    return this.delivery(type, this.paymentIntentJson(intent));
  }

  /** `charge.refunded` for `amountCents` more (default: what is left), with the cumulative `amount_refunded`. */
  refund(paymentIntentId: string, amountCents?: number): Delivery {
    const intent = this.paymentIntents.get(paymentIntentId);
    if (!intent) throw new Error(`no payment intent ${paymentIntentId}`);
    const chargeId = this.chargeOf(intent);
    const charge = this.charges.get(chargeId);
    if (!charge) throw new Error(`no charge ${chargeId}`);
    charge.refunded = Math.min(intent.amount, charge.refunded + (amountCents ?? intent.amount - charge.refunded));
    return this.delivery('charge.refunded', {
      id: chargeId,
      object: 'charge',
      amount: intent.amount,
      amount_captured: intent.amount,
      amount_refunded: charge.refunded,
      refunded: charge.refunded === intent.amount,
      currency: 'usd',
      customer: intent.customer || null,
      payment_intent: intent.id,
      metadata: intent.metadata,
      status: 'succeeded',
    });
  }

  /** `charge.dispute.closed` with status `lost`, of `amountCents` (default: the whole payment). */
  loseDispute(paymentIntentId: string, amountCents?: number): Delivery {
    const intent = this.paymentIntents.get(paymentIntentId);
    if (!intent) throw new Error(`no payment intent ${paymentIntentId}`);
    const chargeId = this.chargeOf(intent);
    const disputeId = this.id('dp');
    this.disputes.set(disputeId, chargeId);
    return this.delivery('charge.dispute.closed', {
      id: disputeId,
      object: 'dispute',
      amount: amountCents ?? intent.amount,
      currency: 'usd',
      charge: chargeId,
      payment_intent: intent.id,
      reason: 'fraudulent',
      status: 'lost',
      metadata: {},
    });
  }

  /** Any event, as Stripe sends it: the JSON envelope and its Stripe-Signature. */
  delivery(type: string, object: Record<string, unknown>, options: { id?: string; timestamp?: number } = {}): Delivery {
    const eventId = options.id ?? this.id('evt');
    const body = JSON.stringify({
      id: eventId,
      object: 'event',
      api_version: '2026-10-28.endive',
      created: options.timestamp ?? Math.floor(Date.now() / 1000),
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type,
      data: { object },
    });
    return { body, eventId, signature: Stripe.webhooks.generateTestHeaderString({ payload: body, secret: this.webhookSecret, timestamp: options.timestamp }) };
  }

  private resign(delivery: Delivery): Delivery {
    return { ...delivery, signature: Stripe.webhooks.generateTestHeaderString({ payload: delivery.body, secret: this.webhookSecret }) };
  }

  private id(prefix: string): string {
    this.counter += 1;
    return `${prefix}_test_${Date.now().toString(36)}${this.counter.toString(36)}${randomBytes(3).toString('hex')}`;
  }

  private card(last4: string, customer: string | null): Card {
    const card = { id: this.id('pm'), last4, customer };
    this.cards.set(card.id, card);
    return card;
  }

  private paymentIntent(fields: Omit<FakePaymentIntent, 'id'>): FakePaymentIntent {
    const intent = { id: this.id('pi'), ...fields };
    this.paymentIntents.set(intent.id, intent);
    if (intent.status === 'succeeded') this.chargeOf(intent);
    return intent;
  }

  private chargeOf(intent: FakePaymentIntent): string {
    for (const [id, charge] of this.charges) if (charge.paymentIntent === intent.id) return id;
    const id = this.id('ch');
    this.charges.set(id, { paymentIntent: intent.id, refunded: 0 });
    return id;
  }

  private paymentIntentJson(intent: FakePaymentIntent): Record<string, unknown> {
    const failed = intent.status !== 'succeeded';
    const charge = [...this.charges].find(([, c]) => c.paymentIntent === intent.id)?.[0] ?? null;
    return {
      id: intent.id,
      object: 'payment_intent',
      amount: intent.amount,
      amount_received: failed ? 0 : intent.amount,
      currency: 'usd',
      customer: intent.customer || null,
      payment_method: intent.payment_method,
      metadata: intent.metadata,
      status: intent.status,
      latest_charge: charge,
      last_payment_error: failed
        ? {
            type: 'card_error',
            code: 'card_declined',
            decline_code: 'card_declined',
            message: 'Your card was declined.',
            payment_method: { id: intent.payment_method },
          }
        : null,
    };
  }

  private sessionJson(session: Session): Record<string, unknown> {
    const complete = Boolean(session.payment_intent || session.setup_intent);
    return {
      id: session.id,
      object: 'checkout.session',
      mode: session.mode,
      status: complete ? 'complete' : 'open',
      payment_status: session.mode === 'setup' ? 'no_payment_required' : session.payment_intent ? 'paid' : 'unpaid',
      client_reference_id: session.client_reference_id,
      customer: session.customer,
      amount_total: session.amount_total,
      currency: session.mode === 'setup' ? null : 'usd',
      metadata: session.metadata,
      payment_intent: session.payment_intent,
      setup_intent: session.setup_intent,
      success_url: session.params.get('success_url'),
      cancel_url: session.params.get('cancel_url'),
      expires_at: Number(session.params.get('expires_at')) || null,
      url: complete ? null : `https://checkout.stripe.test/c/pay/${session.id}`,
    };
  }

  private answer(req: http.IncomingMessage, res: http.ServerResponse, body: string) {
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    const params = method === 'GET' ? new URL(req.url ?? '/', 'http://x').searchParams : new URLSearchParams(body);
    const idempotencyKey = req.headers['idempotency-key'] as string | undefined;
    const request: FakeRequest = { method, path, params, idempotencyKey, authorization: req.headers.authorization };
    this.requests.push(request);
    const send = (answer: Answer) => {
      const id = (answer.json as { id?: unknown })?.id;
      if (typeof id === 'string') request.objectId = id;
      res.writeHead(answer.status, { 'content-type': 'application/json', 'request-id': `req_fake_${this.counter}` }).end(JSON.stringify(answer.json));
    };
    if (this.mode === 'hang') return; // the client's timeout must end it
    if (this.mode === 'fail') return send(stripeError(500, 'api_error', 'An unknown error occurred (the fake is failing on purpose).'));
    const key = idempotencyKey && `${method} ${path} ${idempotencyKey}`;
    let answer = key ? this.byKey.get(key) : undefined;
    if (!answer) {
      answer = this.route(method, path, params);
      if (key && answer.status < 500) this.byKey.set(key, answer);
    }
    if (this.mode === 'commit-then-hang') {
      const id = (answer.json as { id?: unknown })?.id;
      if (typeof id === 'string') request.objectId = id;
      return;
    }
    send(answer);
  }

  private route(method: string, path: string, params: URLSearchParams): Answer {
    const segments = path.split('/').filter(Boolean); // ['v1', resource, id?, action?]
    const [, resource, id, action] = segments;
    if (method === 'POST' && path === '/v1/customers') {
      const customer = { id: this.id('cus'), metadata: metadataOf(params) };
      this.customers.set(customer.id, customer);
      return { status: 200, json: { id: customer.id, object: 'customer', name: params.get('name'), email: params.get('email'), metadata: customer.metadata } };
    }
    if (method === 'POST' && path === '/v1/checkout/sessions') {
      const mode = params.get('mode') ?? 'payment';
      const unit = Number(params.get('line_items[0][price_data][unit_amount]'));
      const quantity = Number(params.get('line_items[0][quantity]') ?? '1');
      const session: Session = {
        id: this.id('cs'),
        mode,
        customer: params.get('customer'),
        client_reference_id: params.get('client_reference_id'),
        metadata: metadataOf(params),
        paymentIntentMetadata: metadataOf(params, 'payment_intent_data[metadata]'),
        amount_total: mode === 'payment' ? unit * quantity : null,
        params,
        payment_intent: null,
        setup_intent: null,
      };
      if (mode === 'setup' && !session.customer) return stripeError(400, 'invalid_request_error', 'customer is required here', { param: 'customer' });
      this.sessions.set(session.id, session);
      return { status: 200, json: this.sessionJson(session) };
    }
    if (method === 'GET' && resource === 'setup_intents' && id && !action) {
      const intent = this.setupIntents.get(id);
      if (!intent) return stripeError(404, 'invalid_request_error', `No such setupintent: '${id}'`, { code: 'resource_missing' });
      return {
        status: 200,
        json: {
          id: intent.id,
          object: 'setup_intent',
          status: 'succeeded',
          customer: intent.customer,
          payment_method: intent.payment_method,
          metadata: intent.metadata,
          usage: 'off_session',
        },
      };
    }
    if (resource === 'payment_methods' && id) {
      const card = this.cards.get(id);
      if (!card) return stripeError(404, 'invalid_request_error', `No such PaymentMethod: '${id}'`, { code: 'resource_missing' });
      if (method === 'POST' && action === 'detach') {
        if (!card.customer)
          return stripeError(400, 'invalid_request_error', `The payment method you provided is not attached to a customer so detachment is impossible.`);
        card.customer = null;
      } else if (!(method === 'GET' && !action)) return stripeError(404, 'invalid_request_error', 'no such route');
      return {
        status: 200,
        json: {
          id: card.id,
          object: 'payment_method',
          type: 'card',
          customer: card.customer,
          card: { brand: 'visa', last4: card.last4, exp_month: 12, exp_year: new Date().getUTCFullYear() + 3, funding: 'credit', country: 'US' },
        },
      };
    }
    if (method === 'POST' && path === '/v1/payment_intents') {
      const paymentMethod = params.get('payment_method') ?? '';
      const card = this.cards.get(paymentMethod);
      if (!card)
        return stripeError(400, 'invalid_request_error', `No such PaymentMethod: '${paymentMethod}'`, { code: 'resource_missing', param: 'payment_method' });
      const customer = params.get('customer') ?? '';
      if (card.customer !== customer) {
        return stripeError(400, 'invalid_request_error', 'The provided PaymentMethod is not attached to this customer.', { param: 'payment_method' });
      }
      const declined = card.last4 === '0341';
      const intent = this.paymentIntent({
        amount: Number(params.get('amount')),
        customer,
        payment_method: paymentMethod,
        metadata: metadataOf(params),
        status: declined ? 'requires_payment_method' : 'succeeded',
      });
      if (declined) {
        return stripeError(402, 'card_error', 'Your card was declined.', {
          code: 'card_declined',
          decline_code: 'card_declined',
          payment_intent: this.paymentIntentJson(intent),
        });
      }
      return { status: 200, json: this.paymentIntentJson(intent) };
    }
    return stripeError(404, 'invalid_request_error', `Unrecognized request URL (${method}: ${path}).`);
  }
}

/** Delivers `delivery` to the gateway's Stripe webhook as Stripe does: the raw JSON and its Stripe-Signature. */
export async function deliver(gatewayUrl: string, delivery: Delivery): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'user-agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
  };
  if (delivery.signature) headers['stripe-signature'] = delivery.signature;
  const response = await fetch(`${gatewayUrl}${webhookPath}`, { method: 'POST', headers, body: delivery.body, signal: AbortSignal.timeout(15_000) });
  return { status: response.status, text: await response.text() };
}
