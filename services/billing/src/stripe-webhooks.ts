import { Code } from '@connectrpc/connect';
import { apiError, retryLater } from '@switchboard/runtime/errors';
import type { Logger } from '@switchboard/runtime/log';
import type Stripe from 'stripe';
import type { PaymentMethods } from './payment-methods.js';
import type { StripeProvider } from './providers/stripe.js';
import type { Refunds } from './refunds.js';
import type { Topups } from './topups.js';

/**
 * Stripe's event receiver (`POST /v1/billing/providers/stripe/webhook`, docs/api/billing.md#stripe-checkout). Every answer but
 * a refused signature, and a refund of a payment not recorded yet, is 204, so Stripe stops delivering:
 *  - Stripe not configured here: 404 `provider_not_configured` (no secret to check anything with).
 *  - A missing, wrong, or stale (older than STRIPE_WEBHOOK_TOLERANCE) signature, or a body changed
 *    after signing: 400 `invalid_signature`; nothing is read from the body.
 *  - `checkout.session.completed` with payment_status `paid`, or
 *    `checkout.session.async_payment_succeeded` (a delayed payment method that went through):
 *    completes the checkout of that session, recording its PaymentIntent (what refunds are
 *    debited against) with the credit, once per event id (Topups.completeByProvider; a replayed or
 *    concurrently redelivered event credits nothing more).
 *  - `checkout.session.completed` of a setup-mode session: saves its card once
 *    (docs/api/billing.md#payment-methods).
 *  - `payment_intent.succeeded` / `payment_intent.payment_failed` of an auto top-up charge
 *    (metadata `auto_topup_charge_id`): the charge's outcome, applied once by auto top-up.
 *  - `charge.refunded` and `charge.dispute.closed` (lost): the balance is debited once per amount
 *    (docs/api/billing.md#refunds-and-disputes); of a payment not recorded yet (events out of order) 503,
 *    so Stripe delivers it again later.
 *  - A session of no checkout or setup of ours: a warning in the log.
 *  - Any other event (or a completed session still unpaid): ignored.
 * Errors of our own (the database) and Stripe failing to answer our reads are 5xx, so Stripe
 * delivers the event again later.
 */

const creditingEvents = new Set(['checkout.session.completed', 'checkout.session.async_payment_succeeded']);

/** What auto top-up does with the outcome of its charges (each idempotent). */
export interface ChargeOutcomes {
  chargeSucceeded(chargeId: string, providerPaymentId: string, requestId?: string): Promise<unknown>;
  chargeFailed(chargeId: string, reason: string, providerPaymentId?: string, requestId?: string): Promise<unknown>;
}

export interface StripeWebhooksDeps {
  stripe?: StripeProvider;
  topups: Topups;
  paymentMethods: PaymentMethods;
  refunds: Refunds;
  /** Auto top-up's charges. */
  autoTopups: ChargeOutcomes;
  log: Logger;
}

const idOf = (value: string | { id: string } | null | undefined): string | undefined => (typeof value === 'string' ? value : value?.id);

const notRecordedYet = () => retryLater('payment_not_recorded', 'The payment of this event is not recorded yet; deliver it again later.', 60, Code.Unavailable);

export class StripeWebhooks {
  constructor(private readonly deps: StripeWebhooksDeps) {}

  async handle(input: { body?: Uint8Array; signature: string; requestId?: string }): Promise<void> {
    const { stripe, log } = this.deps;
    if (!stripe) {
      throw apiError(Code.NotFound, 'provider_not_configured', 'Stripe is not configured on this deployment (STRIPE_SECRET_KEY); payments use the sandbox.');
    }
    const event = stripe.verify(input.body ?? new Uint8Array(), input.signature);
    const facts = { stripe_event_id: event.id, stripe_event_type: event.type, request_id: input.requestId };
    if (creditingEvents.has(event.type)) return this.sessionCompleted(event, facts, input.requestId);
    switch (event.type) {
      case 'payment_intent.succeeded':
      case 'payment_intent.payment_failed':
        return this.chargeOutcome(event.data.object as Stripe.PaymentIntent, event.type, facts, input.requestId);
      case 'charge.refunded':
        return this.refunded(event.data.object as Stripe.Charge, facts, input.requestId);
      case 'charge.dispute.closed':
        return this.disputeClosed(event.data.object as Stripe.Dispute, facts, input.requestId);
    }
    log.debug(facts, 'Stripe event ignored');
  }

  private async sessionCompleted(event: Stripe.Event, facts: Record<string, unknown>, requestId?: string): Promise<void> {
    const { topups, paymentMethods, log } = this.deps;
    const session = event.data.object as Stripe.Checkout.Session;
    if (typeof session?.id !== 'string') {
      log.warn(facts, 'Stripe session event without a session id; ignored');
      return;
    }
    if (session.mode === 'setup') {
      const setupIntent = idOf(session.setup_intent);
      if (event.type !== 'checkout.session.completed' || !setupIntent) {
        log.info({ ...facts, stripe_session_id: session.id }, 'Stripe setup session event without a SetupIntent; ignored');
        return;
      }
      if (!(await paymentMethods.completeByProvider({ sessionId: session.id, setupIntentId: setupIntent, requestId }))) {
        log.warn(
          { ...facts, stripe_session_id: session.id, client_reference_id: session.client_reference_id },
          'Stripe setup session of no setup of ours; nothing saved',
        );
      }
      return;
    }
    if (session.payment_status !== 'paid') {
      log.info({ ...facts, stripe_session_id: session.id, payment_status: session.payment_status }, 'Stripe session not paid yet; waiting for its payment');
      return;
    }
    const known = await topups.completeByProvider({
      provider: 'stripe',
      eventId: event.id,
      sessionId: session.id,
      providerPaymentId: idOf(session.payment_intent),
      requestId,
    });
    if (!known) {
      log.warn(
        { ...facts, stripe_session_id: session.id, client_reference_id: session.client_reference_id },
        'paid Stripe session of no checkout of ours; nothing credited',
      );
    }
  }

  private async chargeOutcome(intent: Stripe.PaymentIntent, type: string, facts: Record<string, unknown>, requestId?: string): Promise<void> {
    const chargeId = intent?.metadata?.auto_topup_charge_id;
    if (!chargeId) {
      this.deps.log.debug(facts, 'Stripe payment of no auto top-up; ignored');
      return;
    }
    const { autoTopups } = this.deps;
    if (type === 'payment_intent.succeeded') {
      await autoTopups.chargeSucceeded(chargeId, intent.id, requestId);
    } else {
      const error = intent.last_payment_error;
      await autoTopups.chargeFailed(chargeId, error?.decline_code ?? error?.code ?? 'payment_failed', intent.id, requestId);
    }
  }

  private async refunded(charge: Stripe.Charge, facts: Record<string, unknown>, requestId?: string): Promise<void> {
    const paymentId = idOf(charge?.payment_intent);
    if (!paymentId || typeof charge.amount_refunded !== 'number') {
      this.deps.log.warn(facts, 'Stripe refund of a charge without a PaymentIntent; ignored');
      return;
    }
    const outcome = await this.deps.refunds.refunded({ chargeId: charge.id, paymentId, amountRefundedCents: charge.amount_refunded, requestId });
    if (outcome === 'unknown') {
      this.deps.log.warn({ ...facts, stripe_payment_intent: paymentId }, 'Stripe refund of a payment not recorded (yet); answered 503 for a redelivery');
      throw notRecordedYet();
    }
  }

  private async disputeClosed(dispute: Stripe.Dispute, facts: Record<string, unknown>, requestId?: string): Promise<void> {
    if (dispute?.status !== 'lost') {
      this.deps.log.info({ ...facts, dispute_status: dispute?.status }, 'Stripe dispute closed in our favour; nothing debited');
      return;
    }
    const paymentId = idOf(dispute.payment_intent);
    const chargeId = idOf(dispute.charge);
    if (!paymentId || !chargeId || typeof dispute.amount !== 'number') {
      this.deps.log.warn(facts, 'lost Stripe dispute without its PaymentIntent; ignored');
      return;
    }
    const outcome = await this.deps.refunds.disputeLost({ disputeId: dispute.id, chargeId, paymentId, amountCents: dispute.amount, requestId });
    if (outcome === 'unknown') {
      this.deps.log.warn({ ...facts, stripe_payment_intent: paymentId }, 'lost Stripe dispute of a payment not recorded (yet); answered 503 for a redelivery');
      throw notRecordedYet();
    }
  }
}
