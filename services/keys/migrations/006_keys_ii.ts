import type { Knex } from '@switchboard/runtime/db';

/**
 * Keys II (docs/api/keys.md): scopes, expiry, allowed models, rate limits, rotation (one budget,
 * two credentials), several alert thresholds, and the periodic budgets beside the month's cap.
 * The key's `month` limit is `monthly_spend_cap_usd` (one source of truth); its day, week and
 * total limits, and all four of a workspace's, are rows of `spend_limits`.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE api_keys
      ADD COLUMN scopes text[] NOT NULL DEFAULT '{inference,read,manage}',
      ADD COLUMN expires_at timestamptz NULL,
      ADD COLUMN expired_event_at timestamptz NULL,
      ADD COLUMN allowed_models text[] NULL,
      ADD COLUMN requests_per_minute integer NULL CHECK (requests_per_minute > 0),
      ADD COLUMN tokens_per_minute integer NULL CHECK (tokens_per_minute > 0),
      ADD COLUMN max_concurrent integer NULL CHECK (max_concurrent > 0),
      ADD COLUMN budget_id text NULL REFERENCES api_keys (id),
      ADD COLUMN rotated_from text NULL REFERENCES api_keys (id),
      ADD COLUMN alert_thresholds_pct integer[] NULL`);
  await knex.raw(`
    UPDATE api_keys SET alert_thresholds_pct = ARRAY(SELECT DISTINCT t FROM unnest(ARRAY[alert_threshold_pct, 100]) AS t ORDER BY t)
     WHERE alert_threshold_pct IS NOT NULL`);
  await knex.raw(`
    CREATE TABLE spend_limits (
      subject text NOT NULL,
      period text NOT NULL CHECK (period IN ('day', 'week', 'month', 'total')),
      amount_usd numeric NOT NULL CHECK (amount_usd >= 0),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (subject, period)
    )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('spend_limits');
  await knex.raw(`
    ALTER TABLE api_keys
      DROP COLUMN alert_thresholds_pct, DROP COLUMN rotated_from, DROP COLUMN budget_id, DROP COLUMN max_concurrent,
      DROP COLUMN tokens_per_minute, DROP COLUMN requests_per_minute, DROP COLUMN allowed_models, DROP COLUMN expired_event_at,
      DROP COLUMN expires_at, DROP COLUMN scopes`);
}
