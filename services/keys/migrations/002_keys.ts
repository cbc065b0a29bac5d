import type { Knex } from '@switchboard/runtime/db';

/**
 * API keys, their spend per calendar month (UTC), the alerts fired, reservations of the data
 * plane, and the workspace balances billing reports. Money is `numeric` without a scale, so a cap
 * keeps the digits it was given ("0.10" stays "0.10") and sums are exact.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE api_keys (
      id text PRIMARY KEY,
      workspace_id text NOT NULL,
      name text NOT NULL,
      -- SHA-256 (hex) of the full key; the key itself is never stored.
      key_hash text NOT NULL CONSTRAINT api_keys_key_hash_key UNIQUE,
      hint text NOT NULL,
      status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
      monthly_spend_cap_usd numeric NULL CHECK (monthly_spend_cap_usd >= 0),
      alert_webhook_url text NULL,
      alert_threshold_pct integer NULL CHECK (alert_threshold_pct BETWEEN 1 AND 100),
      -- whsec_… under the data keys (it must sign, so it cannot be hashed).
      alert_signing_secret_encrypted text NULL,
      routing_policy text NOT NULL DEFAULT 'any' CHECK (routing_policy IN ('cn-only', 'overseas-only', 'any')),
      created_by text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      last_used_at timestamptz NULL,
      revoked_at timestamptz NULL,
      revoked_by text NULL,
      revoked_reason text NULL,
      CHECK ((status = 'revoked') = (revoked_at IS NOT NULL)),
      CHECK ((alert_webhook_url IS NULL) = (alert_threshold_pct IS NULL) AND (alert_webhook_url IS NULL) = (alert_signing_secret_encrypted IS NULL))
    )`);
  await knex.raw('CREATE INDEX api_keys_workspace_page_idx ON api_keys (workspace_id, created_at DESC, id DESC)');
  await knex.raw(`CREATE INDEX api_keys_creator_idx ON api_keys (created_by, workspace_id) WHERE status = 'active'`);

  // One row per key and month that had usage: the month is the key (no reset job), and past
  // months stay queryable.
  await knex.raw(`
    CREATE TABLE key_monthly_spend (
      key_id text NOT NULL REFERENCES api_keys (id),
      month date NOT NULL CHECK (extract(day FROM month) = 1),
      spend_usd numeric NOT NULL DEFAULT 0,
      usage_count bigint NOT NULL DEFAULT 0,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (key_id, month)
    )`);

  // The primary key is the once-per-threshold-per-month rule.
  await knex.raw(`
    CREATE TABLE spend_alerts (
      key_id text NOT NULL REFERENCES api_keys (id),
      month date NOT NULL,
      threshold_pct integer NOT NULL CHECK (threshold_pct BETWEEN 1 AND 100),
      spend_usd numeric NOT NULL,
      cap_usd numeric NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (key_id, month, threshold_pct)
    )`);

  // Open while settled_at is null and expires_at is ahead; settled by billing.usage.recorded.
  await knex.raw(`
    CREATE TABLE reservations (
      id text PRIMARY KEY,
      key_id text NOT NULL REFERENCES api_keys (id),
      amount_usd numeric NOT NULL CHECK (amount_usd >= 0),
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      settled_at timestamptz NULL
    )`);
  await knex.raw('CREATE INDEX reservations_open_idx ON reservations (key_id, expires_at) WHERE settled_at IS NULL');

  // The latest balance billing reported for a workspace (its events carry the balance after each
  // debit or credit, and its version); the version orders reports that arrive out of order.
  await knex.raw(`
    CREATE TABLE workspace_balances (
      workspace_id text PRIMARY KEY,
      balance_usd numeric NOT NULL,
      -- billing's balance_version (0 when an event carries none: as_of orders those).
      balance_version bigint NOT NULL DEFAULT 0,
      as_of timestamptz NOT NULL
    )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema
    .dropTableIfExists('workspace_balances')
    .dropTableIfExists('reservations')
    .dropTableIfExists('spend_alerts')
    .dropTableIfExists('key_monthly_spend')
    .dropTableIfExists('api_keys');
}
