import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// Auto top-up: the settings of each workspace and the charges crossings of its threshold start.

export interface AutoTopupRow {
  workspace_id: string;
  enabled: boolean;
  threshold_usd: string | null;
  amount_usd: string | null;
  monthly_limit_usd: string | null;
  low_balance_threshold_usd: string | null;
  consecutive_failures: number;
  disabled_reason: 'charge_failures' | 'payment_method_removed' | null;
  updated_by: string | null;
  updated_at: Date;
}

export type AutoTopupSettings = Pick<AutoTopupRow, 'enabled' | 'threshold_usd' | 'amount_usd' | 'monthly_limit_usd' | 'low_balance_threshold_usd'>;

const settingsColumns = `workspace_id, enabled, threshold_usd::text AS threshold_usd, amount_usd::text AS amount_usd,
  monthly_limit_usd::text AS monthly_limit_usd, low_balance_threshold_usd::text AS low_balance_threshold_usd,
  consecutive_failures, disabled_reason, updated_by, updated_at`;

export async function findAutoTopup(db: Db, workspaceId: string): Promise<AutoTopupRow | undefined> {
  const { rows } = await db.raw<{ rows: AutoTopupRow[] }>(`SELECT ${settingsColumns} FROM auto_topups WHERE workspace_id = ?`, [workspaceId]);
  return rows[0];
}

/** The settings of those of `workspaceIds` that watch their balance (auto top-up on, or a low-balance notice set). */
export async function watchingAutoTopups(trx: Knex.Transaction, workspaceIds: string[]): Promise<AutoTopupRow[]> {
  const { rows } = await trx.raw<{ rows: AutoTopupRow[] }>(
    `SELECT ${settingsColumns} FROM auto_topups
      WHERE workspace_id = ANY (?::text[]) AND (enabled OR low_balance_threshold_usd IS NOT NULL)`,
    [workspaceIds],
  );
  return rows;
}

/** Locks the settings row of the workspace (or finds none). */
export async function lockAutoTopup(trx: Knex.Transaction, workspaceId: string): Promise<AutoTopupRow | undefined> {
  const { rows } = await trx.raw<{ rows: AutoTopupRow[] }>(`SELECT ${settingsColumns} FROM auto_topups WHERE workspace_id = ? FOR UPDATE`, [workspaceId]);
  return rows[0];
}

/** Saves a user's settings: clears the reason the service switched it off; `resetFailures` when switching it on. */
export async function saveAutoTopup(
  trx: Knex.Transaction,
  workspaceId: string,
  settings: AutoTopupSettings,
  by: { userId: string | null; resetFailures: boolean },
): Promise<AutoTopupRow> {
  const { rows } = await trx.raw<{ rows: AutoTopupRow[] }>(
    `INSERT INTO auto_topups AS t (workspace_id, enabled, threshold_usd, amount_usd, monthly_limit_usd, low_balance_threshold_usd, updated_by)
     VALUES (?, ?, ?::numeric, ?::numeric, ?::numeric, ?::numeric, ?)
     ON CONFLICT (workspace_id) DO UPDATE SET enabled = excluded.enabled, threshold_usd = excluded.threshold_usd,
       amount_usd = excluded.amount_usd, monthly_limit_usd = excluded.monthly_limit_usd,
       low_balance_threshold_usd = excluded.low_balance_threshold_usd, updated_by = excluded.updated_by,
       disabled_reason = NULL, updated_at = now(),
       consecutive_failures = CASE WHEN ? THEN 0 ELSE t.consecutive_failures END
     RETURNING ${settingsColumns}`,
    [
      workspaceId,
      settings.enabled,
      settings.threshold_usd,
      settings.amount_usd,
      settings.monthly_limit_usd,
      settings.low_balance_threshold_usd,
      by.userId,
      by.resetFailures,
    ],
  );
  return rows[0];
}

/** Switches auto top-up off for the service's `reason`; the row as it is after. */
export async function disableAutoTopup(
  trx: Knex.Transaction,
  workspaceId: string,
  reason: 'charge_failures' | 'payment_method_removed',
): Promise<AutoTopupRow> {
  const { rows } = await trx.raw<{ rows: AutoTopupRow[] }>(
    `UPDATE auto_topups SET enabled = false, disabled_reason = ?, updated_by = NULL, updated_at = now() WHERE workspace_id = ? RETURNING ${settingsColumns}`,
    [reason, workspaceId],
  );
  return rows[0];
}

/** Counts a failed charge; returns the failures in a row after it. */
export async function countFailure(trx: Knex.Transaction, workspaceId: string): Promise<number> {
  const { rows } = await trx.raw<{ rows: Array<{ consecutive_failures: number }> }>(
    'UPDATE auto_topups SET consecutive_failures = consecutive_failures + 1 WHERE workspace_id = ? RETURNING consecutive_failures',
    [workspaceId],
  );
  return rows[0]?.consecutive_failures ?? 0;
}

export async function resetFailures(trx: Knex.Transaction, workspaceId: string): Promise<void> {
  await trx.raw('UPDATE auto_topups SET consecutive_failures = 0 WHERE workspace_id = ? AND consecutive_failures <> 0', [workspaceId]);
}

// --- charges -------------------------------------------------------------------------------

export interface ChargeRow {
  id: string;
  workspace_id: string;
  amount_usd: string;
  month: string;
  provider: 'sandbox' | 'stripe';
  status: 'pending' | 'succeeded' | 'failed';
  payment_method_id: string | null;
  provider_method_id: string | null;
  provider_customer_id: string | null;
  provider_payment_id: string | null;
  failure_reason: string | null;
  attempts: number;
  created_at: Date;
  completed_at: Date | null;
}

/**
 * The charges that count toward `monthly_limit_usd`: pending, succeeded, and those counted failed
 * unanswered (`provider_unanswered`), which the provider may still have taken and report later,
 * when they are credited (docs/api/billing.md#auto-top-up).
 */
const countedInMonth = "(status IN ('pending', 'succeeded') OR (status = 'failed' AND failure_reason = 'provider_unanswered'))";

const chargeColumns = `id, workspace_id, amount_usd::text AS amount_usd, to_char(month, 'YYYY-MM-DD') AS month, provider, status,
  payment_method_id, provider_method_id, provider_customer_id, provider_payment_id, failure_reason, attempts, created_at, completed_at`;

/**
 * Inserts a pending charge unless the workspace has one pending (the partial unique index), it
 * would take the month's counted charges (`countedInMonth`) past `monthlyLimitUsd`, or the workspace
 * had `maxFailuresPerDay` charges fail in the last 24 hours; true when inserted.
 * Callers hold the account's lock, which serializes the month's sum.
 */
export async function insertPendingCharge(
  trx: Knex.Transaction,
  charge: { id: string; workspaceId: string; amountUsd: string; month: string; provider: string; monthlyLimitUsd: string; maxFailuresPerDay: number },
): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: unknown[] }>(
    `INSERT INTO auto_topup_charges (id, workspace_id, amount_usd, month, provider)
     SELECT ?, ?, ?::numeric, ?::date, ?
      WHERE (SELECT coalesce(sum(amount_usd), 0) FROM auto_topup_charges
              WHERE workspace_id = ? AND month = ?::date AND ${countedInMonth}) + ?::numeric <= ?::numeric
        AND (SELECT count(*) FROM auto_topup_charges
              WHERE workspace_id = ? AND status = 'failed' AND completed_at > now() - interval '24 hours'
                AND failure_reason NOT IN ('auto_topup_disabled', 'provider_changed')) < ?
     ON CONFLICT (workspace_id) WHERE status = 'pending' DO NOTHING
     RETURNING id`,
    [
      charge.id,
      charge.workspaceId,
      charge.amountUsd,
      charge.month,
      charge.provider,
      charge.workspaceId,
      charge.month,
      charge.amountUsd,
      charge.monthlyLimitUsd,
      charge.workspaceId,
      charge.maxFailuresPerDay,
    ],
  );
  return rows.length === 1;
}

/** What the workspace's charges of `month` counted toward its limit (`countedInMonth`) add up to, 2 decimals. */
export async function chargedInMonth(db: Db, workspaceId: string, month: string): Promise<string> {
  const { rows } = await db.raw<{ rows: Array<{ total: string }> }>(
    `SELECT round(coalesce(sum(amount_usd), 0), 2)::text AS total FROM auto_topup_charges
      WHERE workspace_id = ? AND month = ?::date AND ${countedInMonth}`,
    [workspaceId, month],
  );
  return rows[0].total;
}

export async function findCharge(db: Db, id: string): Promise<ChargeRow | undefined> {
  const { rows } = await db.raw<{ rows: ChargeRow[] }>(`SELECT ${chargeColumns} FROM auto_topup_charges WHERE id = ?`, [id]);
  return rows[0];
}

export async function lockCharge(trx: Knex.Transaction, id: string): Promise<ChargeRow | undefined> {
  const { rows } = await trx.raw<{ rows: ChargeRow[] }>(`SELECT ${chargeColumns} FROM auto_topup_charges WHERE id = ? FOR UPDATE`, [id]);
  return rows[0];
}

export async function listCharges(db: Db, workspaceId: string): Promise<ChargeRow[]> {
  const { rows } = await db.raw<{ rows: ChargeRow[] }>(`SELECT ${chargeColumns} FROM auto_topup_charges WHERE workspace_id = ? ORDER BY created_at, id`, [
    workspaceId,
  ]);
  return rows;
}

/**
 * Claims up to `limit` pending charges no worker holds, oldest first, until `leaseMs` from now
 * (SKIP LOCKED: replicas claim different charges). Counts the attempt.
 */
export async function claimPendingCharges(db: Db, limit: number, leaseMs: number): Promise<ChargeRow[]> {
  const { rows } = await db.raw<{ rows: ChargeRow[] }>(
    `UPDATE auto_topup_charges SET claimed_until = now() + ? * interval '1 millisecond', attempts = attempts + 1
      WHERE id IN (SELECT id FROM auto_topup_charges
                    WHERE status = 'pending' AND (claimed_until IS NULL OR claimed_until <= now())
                    ORDER BY created_at LIMIT ? FOR UPDATE SKIP LOCKED)
        AND status = 'pending'
     RETURNING ${chargeColumns}`,
    [leaseMs, limit],
  );
  return rows;
}

/** Lets a pending charge be claimed again after `afterMs`. */
export async function releaseCharge(db: Db, id: string, afterMs: number): Promise<void> {
  await db.raw(`UPDATE auto_topup_charges SET claimed_until = now() + ? * interval '1 millisecond' WHERE id = ? AND status = 'pending'`, [afterMs, id]);
}

/** Pins the method a pending charge is made with (its first attempt); false when another attempt pinned one first. */
export async function pinChargeMethod(
  db: Db,
  id: string,
  method: { id: string; providerMethodId: string; providerCustomerId: string | null },
): Promise<boolean> {
  const { rows } = await db.raw<{ rows: unknown[] }>(
    `UPDATE auto_topup_charges SET payment_method_id = ?, provider_method_id = ?, provider_customer_id = ?
      WHERE id = ? AND status = 'pending' AND payment_method_id IS NULL RETURNING id`,
    [method.id, method.providerMethodId, method.providerCustomerId, id],
  );
  return rows.length === 1;
}

export async function markChargeSucceeded(trx: Knex.Transaction, id: string, providerPaymentId: string): Promise<Date> {
  const { rows } = await trx.raw<{ rows: Array<{ completed_at: Date }> }>(
    `UPDATE auto_topup_charges SET status = 'succeeded', provider_payment_id = ?, failure_reason = NULL, claimed_until = NULL, completed_at = now()
      WHERE id = ? RETURNING completed_at`,
    [providerPaymentId, id],
  );
  return rows[0].completed_at;
}

export async function markChargeFailed(trx: Knex.Transaction, id: string, reason: string, providerPaymentId: string | null): Promise<Date> {
  const { rows } = await trx.raw<{ rows: Array<{ completed_at: Date }> }>(
    `UPDATE auto_topup_charges SET status = 'failed', failure_reason = ?, provider_payment_id = coalesce(?, provider_payment_id),
       claimed_until = NULL, completed_at = now()
      WHERE id = ? RETURNING completed_at`,
    [reason, providerPaymentId, id],
  );
  return rows[0].completed_at;
}
