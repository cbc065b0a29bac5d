import { Code } from '@connectrpc/connect';
import { apiError } from '@switchboard/runtime/errors';
import type { Logger } from '@switchboard/runtime/log';
import type Stripe from 'stripe';
import type { StripeProvider } from './providers/stripe.js';
import type { Topups } from './topups.js';

/**
 * Stripe's event receiver (`POST /v1/billing/providers/stripe/webhook`, docs/api/billing.md#stripe-checkout). Every answer but
 * a refused signature is 204, so Stripe stops delivering:
 *  - Stripe not configured here: 404 `provider_not_configured` (no secret to check anything with).
 *  - A missing, wrong, or stale (older than STRIPE_WEBHOOK_TOLERANCE) signature, or a body changed
 *    after signing: 400 `invalid_signature`; nothing is read from the body.
 *  - `checkout.session.completed` with payment_status `paid`, or
 *    `checkout.session.async_payment_succeeded` (a delayed payment method that went through):
 *    completes the checkout of that session once per event id (Topups.completeByProvider; a
 *    replayed or concurrently redelivered event credits nothing more).
 *  - A session of no checkout of ours: a warning in the log.
 *  - Any other event (or a completed session still unpaid): ignored.
 * Errors of our own (the database) are 5xx, so Stripe delivers the event again later.
 */

const creditingEvents = new Set(['checkout.session.completed', 'checkout.session.async_payment_succeeded']);

export class StripeWebhooks {
  constructor(private readonly deps: { stripe?: StripeProvider; topups: Topups; log: Logger }) {}

  async handle(input: { body?: Uint8Array; signature: string; requestId?: string }): Promise<void> {
    const { stripe, topups, log } = this.deps;
    if (!stripe) {
      throw apiError(Code.NotFound, 'provider_not_configured', 'Stripe is not configured on this deployment (STRIPE_SECRET_KEY); payments use the sandbox.');
    }
    const event = stripe.verify(input.body ?? new Uint8Array(), input.signature);
    const facts = { stripe_event_id: event.id, stripe_event_type: event.type, request_id: input.requestId };
    if (!creditingEvents.has(event.type)) {
      log.debug(facts, 'Stripe event ignored');
      return;
    }
    const session = event.data.object as Stripe.Checkout.Session;
    if (typeof session?.id !== 'string') {
      log.warn(facts, 'Stripe session event without a session id; ignored');
      return;
    }
    if (session.payment_status !== 'paid') {
      log.info({ ...facts, stripe_session_id: session.id, payment_status: session.payment_status }, 'Stripe session not paid yet; waiting for its payment');
      return;
    }
    const known = await topups.completeByProvider({ provider: 'stripe', eventId: event.id, sessionId: session.id, requestId: input.requestId });
    if (!known) {
      log.warn(
        { ...facts, stripe_session_id: session.id, client_reference_id: session.client_reference_id },
        'paid Stripe session of no checkout of ours; nothing credited',
      );
    }
  }
}
