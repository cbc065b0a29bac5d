import type { Knex } from '@switchboard/runtime/db';

// Month-to-date spend per key and the spend alerts fired (once per key, month and threshold).

/**
 * Adds each cost to its key's spend of its month, in one statement; returns the new totals.
 * `costs` holds one row per key and month (a batch's costs summed), as one statement may not
 * update a row twice.
 */
export async function addSpends(
  trx: Knex.Transaction,
  costs: Array<{ keyId: string; month: string; costUsd: string; count: number }>,
): Promise<Array<{ key_id: string; month: string; spend_usd: string }>> {
  const { rows } = await trx.raw<{ rows: Array<{ key_id: string; month: string; spend_usd: string }> }>(
    `INSERT INTO key_monthly_spend AS s (key_id, month, spend_usd, usage_count)
     SELECT * FROM unnest(?::text[], ?::date[], ?::numeric[], ?::bigint[])
     ON CONFLICT (key_id, month) DO UPDATE SET spend_usd = s.spend_usd + EXCLUDED.spend_usd, usage_count = s.usage_count + EXCLUDED.usage_count, updated_at = now()
     RETURNING key_id, to_char(month, 'YYYY-MM-DD') AS month, spend_usd::text`,
    [costs.map((c) => c.keyId), costs.map((c) => c.month), costs.map((c) => c.costUsd), costs.map((c) => c.count)],
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

export interface AlertSettingsRow {
  id: string;
  workspace_id: string;
  monthly_spend_cap_usd: string | null;
  alert_threshold_pct: number | null;
  alert_webhook_url: string | null;
}

/** The workspace, cap and alert settings of the keys that exist among `keyIds`. */
export async function findAlertSettings(trx: Knex.Transaction, keyIds: string[]): Promise<AlertSettingsRow[]> {
  return trx('api_keys')
    .whereIn('id', keyIds)
    .select('id', 'workspace_id', trx.raw('monthly_spend_cap_usd::text AS monthly_spend_cap_usd'), 'alert_threshold_pct', 'alert_webhook_url');
}

/** Records an alert unless this threshold already fired this month; true when it is new. */
export async function insertSpendAlert(
  trx: Knex.Transaction,
  alert: { keyId: string; month: string; thresholdPct: number; spendUsd: string; capUsd: string },
): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: unknown[] }>(
    `INSERT INTO spend_alerts (key_id, month, threshold_pct, spend_usd, cap_usd) VALUES (?, ?::date, ?, ?::numeric, ?::numeric)
     ON CONFLICT DO NOTHING RETURNING key_id`,
    [alert.keyId, alert.month, alert.thresholdPct, alert.spendUsd, alert.capUsd],
  );
  return rows.length === 1;
}

/** The alerts of a key in a month, oldest first. */
export async function listSpendAlerts(db: Knex, keyId: string, month: string): Promise<Array<{ threshold_pct: number; spend_usd: string }>> {
  return db('spend_alerts').where({ key_id: keyId, month }).orderBy('created_at').select('threshold_pct', db.raw('spend_usd::text AS spend_usd'));
}
