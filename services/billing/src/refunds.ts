import { DisputeLostSchema, RefundRecordedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import { formatMoney, Money } from '@switchboard/runtime/money';
import type { EventWriter } from '@switchboard/runtime/service';
import type { Ledger } from './ledger.js';
import { centsToUsd } from './providers/stripe.js';
import { lockProviderPayment, recordDispute, setRefunded } from './store/provider-payments.js';

/**
 * Money taken back by the provider (docs/api/billing.md#refunds-and-disputes): a refund or a lost
 * dispute of a payment that credited a balance debits that balance (it may go below zero, which
 * blocks the data plane), in one transaction with its event.
 *  - Refunds: Stripe reports the charge's cumulative `amount_refunded`; the payment row keeps the
 *    largest cumulative amount debited so far, so a replayed, redelivered or out-of-order event
 *    debits only what is new (nothing for an older one), and never more than the payment.
 *  - Lost disputes: once per dispute id (`provider_disputes`).
 *  - A payment we do not know (its credit is not recorded yet: events out of order) is
 *    `unknown`: the webhook answers 503 and Stripe delivers it again later.
 */

export interface RefundsDeps {
  db: Knex;
  log: Logger;
  /** Ledger.post: every debit with its ledger entry, in the caller's transaction. */
  post: Ledger['post'];
  recordEvent: EventWriter;
}

export type TakenBack = 'debited' | 'nothing' | 'unknown';

export class Refunds {
  constructor(private readonly deps: RefundsDeps) {}

  /** A charge's refunds, as its cumulative refunded amount in cents. */
  async refunded(input: { chargeId: string; paymentId: string; amountRefundedCents: number; requestId?: string }): Promise<TakenBack> {
    return this.deps.db.transaction(async (trx) => {
      const payment = await lockProviderPayment(trx, input.paymentId);
      if (!payment) return 'unknown';
      // Never more than the payment less what lost disputes took of it.
      const refundable = new Money(payment.amount_usd).minus(payment.disputed_usd);
      const cumulative = Money.min(new Money(centsToUsd(input.amountRefundedCents)), refundable);
      const delta = cumulative.minus(payment.refunded_usd);
      if (delta.lte(0)) return 'nothing';
      await setRefunded(trx, payment.provider_payment_id, formatMoney(cumulative));
      // Whole cents, shown as such ("5.50").
      const amountUsd = delta.toFixed(2);
      const posted = await this.deps.post(trx, {
        workspaceId: payment.workspace_id,
        type: 'refund',
        amountUsd: delta.neg().toFixed(2),
        reference: input.chargeId,
        requestId: input.requestId,
      });
      await this.deps.recordEvent(trx, RefundRecordedSchema, {
        workspaceId: payment.workspace_id,
        data: { workspaceId: payment.workspace_id, providerChargeId: input.chargeId, topupId: payment.topup_id, amountUsd, balanceUsd: posted.balanceUsd },
        requestId: input.requestId,
      });
      this.deps.log.info(
        { workspace_id: payment.workspace_id, provider_payment_id: payment.provider_payment_id, amount_usd: amountUsd, request_id: input.requestId },
        'refund debited',
      );
      return 'debited';
    });
  }

  /** A dispute closed as lost: its amount (at most what refunds left of the payment) is debited once. */
  async disputeLost(input: { disputeId: string; chargeId: string; paymentId: string; amountCents: number; requestId?: string }): Promise<TakenBack> {
    return this.deps.db.transaction(async (trx) => {
      const payment = await lockProviderPayment(trx, input.paymentId);
      if (!payment) return 'unknown';
      // Never more than what is left of the payment after its refunds and other lost disputes.
      const left = new Money(payment.amount_usd).minus(payment.refunded_usd).minus(payment.disputed_usd);
      const amountUsd = Money.min(new Money(centsToUsd(input.amountCents)), left).toFixed(2);
      if (new Money(amountUsd).lte(0)) return 'nothing';
      if (!(await recordDispute(trx, { disputeId: input.disputeId, providerPaymentId: payment.provider_payment_id, amountUsd }))) return 'nothing';
      const posted = await this.deps.post(trx, {
        workspaceId: payment.workspace_id,
        type: 'dispute',
        amountUsd: `-${amountUsd}`,
        reference: input.disputeId,
        requestId: input.requestId,
      });
      await this.deps.recordEvent(trx, DisputeLostSchema, {
        workspaceId: payment.workspace_id,
        data: { workspaceId: payment.workspace_id, disputeId: input.disputeId, providerChargeId: input.chargeId, amountUsd, balanceUsd: posted.balanceUsd },
        requestId: input.requestId,
      });
      this.deps.log.info(
        { workspace_id: payment.workspace_id, dispute_id: input.disputeId, amount_usd: amountUsd, request_id: input.requestId },
        'lost dispute debited',
      );
      return 'debited';
    });
  }
}
