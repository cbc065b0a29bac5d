import type { Knex } from '@switchboard/runtime/db';

// Month-to-date spend per budget (a key id: the key's own, or the one it was rotated from), and the
// spend alerts fired (once per budget, period, period start and threshold).

/**
 * Adds each cost to its budget's spend of its month, in one statement; returns the new totals.
 * `costs` holds one row per key and month (a batch's costs summed), as one statement may not
 * update a row twice.
 */
export async function addSpends(
  trx: Knex.Transaction,
  costs: Array<{ keyId: string; month: string; costUsd: string; count: number }>,
): Promise<Array<{ key_id: string; month: string; spend_usd: string }>> {
  // In key order: concurrent batches lock shared rows in the same order (no deadlock).
  const sorted = [...costs].sort((a, b) => (a.keyId === b.keyId ? a.month.localeCompare(b.month) : a.keyId < b.keyId ? -1 : 1));
  const { rows } = await trx.raw<{ rows: Array<{ key_id: string; month: string; spend_usd: string }> }>(
    `INSERT INTO key_monthly_spend AS s (key_id, month, spend_usd, usage_count)
     SELECT * FROM unnest(?::text[], ?::date[], ?::numeric[], ?::bigint[])
     ON CONFLICT (key_id, month) DO UPDATE SET spend_usd = s.spend_usd + EXCLUDED.spend_usd, usage_count = s.usage_count + EXCLUDED.usage_count, updated_at = now()
     RETURNING key_id, to_char(month, 'YYYY-MM-DD') AS month, spend_usd::text`,
    [sorted.map((c) => c.keyId), sorted.map((c) => c.month), sorted.map((c) => c.costUsd), sorted.map((c) => c.count)],
  );
  return rows;
}

/** What counts against a key's cap in a month, beside one lease (`exceptLeaseId`, '' for none). */
export interface CapCommitments {
  /** The month's settled spend. */
  spend: string;
  /** Open reservations of AuthorizeKey made this month. */
  reserved: string;
  /** The unsettled part of the other unexpired leases of the month. */
  leased: string;
  /** How many of those leases still have an unsettled part. */
  leases: number;
}

/**
 * One statement, so spend and leases are read from one snapshot: a usage batch moves a cost from
 * a lease to the spend in one transaction, and this sees both sides of it or neither. Called
 * under the key's row lock (lockKeyCap), after it was granted, so every earlier decision of the
 * key is committed and seen.
 */
export async function capCommitments(trx: Knex.Transaction, keyId: string, month: string, exceptLeaseId: string): Promise<CapCommitments> {
  const { rows } = await trx.raw<{ rows: Array<{ spend: string; reserved: string; leased: string; leases: string }> }>(
    `SELECT COALESCE((SELECT spend_usd FROM key_monthly_spend WHERE key_id = ? AND month = ?::date), 0)::text AS spend,
            COALESCE((SELECT sum(amount_usd) FROM reservations
                       WHERE key_id = ? AND settled_at IS NULL AND expires_at > now() AND created_at >= (?::date)::timestamp AT TIME ZONE 'UTC'), 0)::text AS reserved,
            COALESCE(sum(GREATEST(l.granted_usd - l.settled_usd, 0)), 0)::text AS leased,
            count(*) FILTER (WHERE l.granted_usd > l.settled_usd) AS leases
       FROM cap_leases l
      WHERE l.key_id = ? AND l.month = ?::date AND l.expires_at > now() AND l.id <> ?`,
    [keyId, month, keyId, month, keyId, month, exceptLeaseId],
  );
  const row = rows[0];
  return { spend: row.spend, reserved: row.reserved, leased: row.leased, leases: Number(row.leases) };
}

export interface BudgetSettingsRow {
  id: string;
  workspace_id: string;
  /** The key's budget: its own id, or the one of the key it was rotated from. */
  budget_id: string;
  monthly_spend_cap_usd: string | null;
  alert_threshold_pct: number | null;
  alert_thresholds_pct: number[] | null;
  alert_webhook_url: string | null;
  /** The key's day, week and total limits (its month is the cap). */
  limits: Array<{ period: 'day' | 'week' | 'total'; amount_usd: string }>;
}

/** The workspace, budget, limits and alert settings of the keys that exist among `keyIds`, in one statement. */
export async function findBudgetSettings(trx: Knex.Transaction, keyIds: string[]): Promise<BudgetSettingsRow[]> {
  const { rows } = await trx.raw<{ rows: BudgetSettingsRow[] }>(
    `SELECT k.id, k.workspace_id, COALESCE(k.budget_id, k.id) AS budget_id, k.monthly_spend_cap_usd::text AS monthly_spend_cap_usd,
            k.alert_threshold_pct, k.alert_thresholds_pct, k.alert_webhook_url,
            COALESCE((SELECT json_agg(json_build_object('period', l.period, 'amount_usd', l.amount_usd::text))
                        FROM spend_limits l WHERE l.subject = k.id AND l.period <> 'month'), '[]') AS limits
       FROM api_keys k WHERE k.id = ANY(?::text[])`,
    [keyIds],
  );
  return rows;
}

/** Records an alert unless this threshold of the budget's period already fired; true when it is new. */
export async function insertBudgetAlert(
  trx: Knex.Transaction,
  alert: { subject: string; period: string; periodStart: string; thresholdPct: number; keyId: string; spendUsd: string; capUsd: string },
): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: unknown[] }>(
    `INSERT INTO budget_alerts (subject, period, period_start, threshold_pct, key_id, spend_usd, cap_usd) VALUES (?, ?, ?::date, ?, ?, ?::numeric, ?::numeric)
     ON CONFLICT DO NOTHING RETURNING subject`,
    [alert.subject, alert.period, alert.periodStart, alert.thresholdPct, alert.keyId, alert.spendUsd, alert.capUsd],
  );
  return rows.length === 1;
}
