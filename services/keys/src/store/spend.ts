import type { Knex } from '@switchboard/runtime/db';

// Month-to-date spend per key and the spend alerts fired (once per key, month and threshold).

/** Adds `costUsd` to the key's spend of `month`, atomically; returns the new total. */
export async function addSpend(trx: Knex.Transaction, keyId: string, month: string, costUsd: string): Promise<string> {
  const { rows } = await trx.raw<{ rows: Array<{ spend_usd: string }> }>(
    `INSERT INTO key_monthly_spend AS s (key_id, month, spend_usd, usage_count) VALUES (?, ?::date, ?::numeric, 1)
     ON CONFLICT (key_id, month) DO UPDATE SET spend_usd = s.spend_usd + EXCLUDED.spend_usd, usage_count = s.usage_count + 1, updated_at = now()
     RETURNING spend_usd::text`,
    [keyId, month, costUsd],
  );
  return rows[0].spend_usd;
}

/** The cap and alert settings that decide alerts, read after the spend was added (same transaction). */
export async function findAlertSettings(
  trx: Knex.Transaction,
  keyId: string,
): Promise<{ workspace_id: string; monthly_spend_cap_usd: string | null; alert_threshold_pct: number | null; alert_webhook_url: string | null } | undefined> {
  return trx('api_keys').where({ id: keyId }).first('workspace_id', 'monthly_spend_cap_usd', 'alert_threshold_pct', 'alert_webhook_url');
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
