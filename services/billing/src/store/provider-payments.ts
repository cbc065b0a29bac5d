import type { Knex } from '@switchboard/runtime/db';

// Provider payments that credited a balance, and what was taken back of each (refunds, lost disputes).

export interface ProviderPaymentRow {
  provider_payment_id: string;
  workspace_id: string;
  topup_id: string;
  amount_usd: string;
  refunded_usd: string;
  disputed_usd: string;
}

/**
 * Records a payment that credited a top-up (a checkout or an auto top-up charge), in the
 * transaction of the credit; recording it again changes nothing.
 */
export async function recordProviderPayment(
  trx: Knex.Transaction,
  payment: { providerPaymentId: string; workspaceId: string; topupId: string; amountUsd: string },
): Promise<void> {
  await trx.raw(
    `INSERT INTO provider_payments (provider_payment_id, workspace_id, topup_id, amount_usd) VALUES (?, ?, ?, ?::numeric)
     ON CONFLICT (provider_payment_id) DO NOTHING`,
    [payment.providerPaymentId, payment.workspaceId, payment.topupId, payment.amountUsd],
  );
}

/** The payment, its row locked until the transaction ends (what serializes its refunds and disputes). */
export async function lockProviderPayment(trx: Knex.Transaction, providerPaymentId: string): Promise<ProviderPaymentRow | undefined> {
  const { rows } = await trx.raw<{ rows: ProviderPaymentRow[] }>(
    `SELECT provider_payment_id, workspace_id, topup_id, amount_usd::text AS amount_usd, refunded_usd::text AS refunded_usd,
            disputed_usd::text AS disputed_usd
       FROM provider_payments WHERE provider_payment_id = ? FOR UPDATE`,
    [providerPaymentId],
  );
  return rows[0];
}

export async function setRefunded(trx: Knex.Transaction, providerPaymentId: string, refundedUsd: string): Promise<void> {
  await trx('provider_payments').where({ provider_payment_id: providerPaymentId }).update({ refunded_usd: refundedUsd });
}

/** Records a lost dispute once; false when it was recorded before. */
export async function recordDispute(trx: Knex.Transaction, dispute: { disputeId: string; providerPaymentId: string; amountUsd: string }): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: unknown[] }>(
    'INSERT INTO provider_disputes (dispute_id, provider_payment_id, amount_usd) VALUES (?, ?, ?::numeric) ON CONFLICT DO NOTHING RETURNING dispute_id',
    [dispute.disputeId, dispute.providerPaymentId, dispute.amountUsd],
  );
  if (rows.length === 0) return false;
  await trx.raw('UPDATE provider_payments SET disputed_usd = disputed_usd + ?::numeric WHERE provider_payment_id = ?', [
    dispute.amountUsd,
    dispute.providerPaymentId,
  ]);
  return true;
}
