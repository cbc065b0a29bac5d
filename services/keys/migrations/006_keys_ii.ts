import type { Knex } from '@switchboard/runtime/db';

/**
 * Keys II (docs/api/keys.md): a key's scopes, expiry, model allow-list, rate limits, budget and
 * rotation, several alert thresholds, and the periodic budgets of keys and workspaces.
 *  - `scopes` defaults to all three, so every key created before keeps what it could do.
 *  - `expired_event_at` marks the key.expired event as sent (once per expiry, by housekeeping).
 *  - `allowed_models` NULL is every model; otherwise 1..50 patterns.
 *  - `budget_id` NULL is the key's own id: a rotated key counts against the budget of the key it
 *    was rotated from (one budget, two credentials), so spend rows and leases keyed by it hold.
 *  - `alert_thresholds_pct` replaces `alert_threshold_pct`, which stays its first value for
 *    readers of the single threshold (the two are NULL together, with the alert URL).
 *  - `spend_limits`: the day, week and total budgets of a key (its `month` one is
 *    `api_keys.monthly_spend_cap_usd`, the single source of truth) and every budget of a
 *    workspace, by subject (a key id or a workspace id). A change of a key's rows bumps the key's
 *    state version (migrations/004), so the data plane's replica sees it like any change of the key.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE api_keys
      ADD COLUMN scopes text[] NOT NULL DEFAULT '{inference,read,manage}'
        CHECK (cardinality(scopes) > 0 AND scopes <@ '{inference,read,manage}'::text[]),
      ADD COLUMN expires_at timestamptz NULL,
      ADD COLUMN expired_event_at timestamptz NULL,
      ADD COLUMN allowed_models text[] NULL CHECK (cardinality(allowed_models) BETWEEN 1 AND 50),
      ADD COLUMN requests_per_minute integer NULL CHECK (requests_per_minute > 0),
      ADD COLUMN tokens_per_minute integer NULL CHECK (tokens_per_minute > 0),
      ADD COLUMN max_concurrent integer NULL CHECK (max_concurrent > 0),
      ADD COLUMN budget_id text NULL REFERENCES api_keys (id),
      ADD COLUMN rotated_from text NULL REFERENCES api_keys (id),
      ADD COLUMN alert_thresholds_pct integer[] NULL
        CHECK (cardinality(alert_thresholds_pct) BETWEEN 1 AND 10 AND 1 <= ALL (alert_thresholds_pct) AND 100 >= ALL (alert_thresholds_pct))`);
  // A single threshold meant an alert at it and at the cap.
  await knex.raw(`
    UPDATE api_keys SET alert_thresholds_pct = CASE WHEN alert_threshold_pct = 100 THEN '{100}'::integer[] ELSE ARRAY[alert_threshold_pct, 100] END
      WHERE alert_threshold_pct IS NOT NULL`);
  await knex.raw(`
    ALTER TABLE api_keys ADD CONSTRAINT api_keys_alert_thresholds_check
      CHECK ((alert_webhook_url IS NULL) = (alert_thresholds_pct IS NULL))`);
  // Housekeeping's sweep for key.expired reads only the keys still owed the event.
  await knex.raw('CREATE INDEX api_keys_expiry_due_idx ON api_keys (expires_at) WHERE expires_at IS NOT NULL AND expired_event_at IS NULL');
  await knex.raw('CREATE INDEX api_keys_budget_idx ON api_keys (budget_id) WHERE budget_id IS NOT NULL');

  await knex.raw(`
    CREATE TABLE spend_limits (
      subject text NOT NULL,
      period text NOT NULL CHECK (period IN ('day', 'week', 'month', 'total')),
      amount_usd numeric NOT NULL CHECK (amount_usd >= 0),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (subject, period)
    )`);
  // At commit, like the key's own trigger (migrations/004), so versions become visible in order.
  // The key's row is locked before the advisory lock, keeping 004's rule that the advisory lock
  // comes last; every writer of a key's budgets locks the key's row first anyway (Keys.change,
  // a rotation's new key), so that lock never waits here. A workspace subject matches no key.
  await knex.raw(`
    CREATE FUNCTION spend_limits_bump_key_state_version() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      key_id text := CASE WHEN TG_OP = 'DELETE' THEN OLD.subject ELSE NEW.subject END;
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM api_keys WHERE id = key_id FOR UPDATE) THEN
        RETURN NULL;
      END IF;
      PERFORM pg_advisory_xact_lock(hashtext(TG_TABLE_SCHEMA || '.api_keys.state_version'));
      UPDATE api_keys SET state_version = nextval('api_keys_state_version_seq') WHERE id = key_id;
      RETURN NULL;
    END $$`);
  await knex.raw(`
    CREATE CONSTRAINT TRIGGER spend_limits_key_state_version AFTER INSERT OR UPDATE OR DELETE ON spend_limits
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION spend_limits_bump_key_state_version()`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE spend_limits');
  await knex.raw('DROP FUNCTION spend_limits_bump_key_state_version()');
  await knex.raw('DROP INDEX api_keys_budget_idx');
  await knex.raw('DROP INDEX api_keys_expiry_due_idx');
  await knex.raw(`
    ALTER TABLE api_keys
      DROP CONSTRAINT api_keys_alert_thresholds_check,
      DROP COLUMN scopes, DROP COLUMN expires_at, DROP COLUMN expired_event_at, DROP COLUMN allowed_models,
      DROP COLUMN requests_per_minute, DROP COLUMN tokens_per_minute, DROP COLUMN max_concurrent,
      DROP COLUMN budget_id, DROP COLUMN rotated_from, DROP COLUMN alert_thresholds_pct`);
}
