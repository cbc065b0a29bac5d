import type { Knex } from '@switchboard/runtime/db';

/**
 * Periodic budgets of keys and workspaces, and the leases on them (docs/money-path.md#leases,
 * docs/api/keys.md#periodic-budgets):
 *  - `budget_spend`: spend per subject (a key's budget id, or a workspace id), period and the
 *    period's first day. A key's month stays in key_monthly_spend (keyed by its budget id); a
 *    workspace has all four periods here. A new period starts at zero because its row does not
 *    exist yet: nothing is reset.
 *  - `workspace_leases`: what data planes may spend of a workspace's budgets without asking,
 *    settled by usage like cap_leases.
 *  - `rate_leases`: requests and tokens of a budget's UTC minute (`window_start`), or
 *    concurrency slots (no window), held by a data plane replica.
 *  - `budget_alerts`: a spend alert fired, once per budget, period, period start and threshold
 *    (the primary key decides "once", across replicas).
 *  - `api_keys.spend_limits_version`: bumped when a key's day, week or total limit changes, so
 *    the change bumps the key's state version too (004's trigger) and data planes see it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE budget_spend (
      subject text NOT NULL,
      period text NOT NULL CHECK (period IN ('day', 'week', 'month', 'total')),
      period_start date NOT NULL,
      spend_usd numeric NOT NULL DEFAULT 0,
      usage_count bigint NOT NULL DEFAULT 0,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (subject, period, period_start)
    )`);
  await knex.raw(`
    CREATE TABLE workspace_leases (
      id text PRIMARY KEY,
      workspace_id text NOT NULL,
      holder text NOT NULL,
      granted_usd numeric NOT NULL CHECK (granted_usd >= 0),
      settled_usd numeric NOT NULL DEFAULT 0 CHECK (settled_usd >= 0),
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
  await knex.raw('CREATE INDEX workspace_leases_workspace_idx ON workspace_leases (workspace_id, expires_at)');
  await knex.raw('CREATE INDEX workspace_leases_expiry_idx ON workspace_leases (expires_at)');
  await knex.raw(`
    CREATE TABLE rate_leases (
      id text PRIMARY KEY,
      budget_id text NOT NULL REFERENCES api_keys (id),
      dimension text NOT NULL CHECK (dimension IN ('requests', 'tokens', 'concurrency')),
      -- The UTC minute of requests and tokens; NULL for concurrency.
      window_start timestamptz NULL CHECK ((dimension = 'concurrency') = (window_start IS NULL)),
      holder text NOT NULL,
      granted bigint NOT NULL CHECK (granted >= 0),
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
  await knex.raw('CREATE INDEX rate_leases_budget_idx ON rate_leases (budget_id, dimension, expires_at)');
  await knex.raw('CREATE INDEX rate_leases_expiry_idx ON rate_leases (expires_at)');
  await knex.raw(`
    CREATE TABLE budget_alerts (
      subject text NOT NULL,
      period text NOT NULL CHECK (period IN ('day', 'week', 'month', 'total')),
      period_start date NOT NULL,
      threshold_pct integer NOT NULL CHECK (threshold_pct BETWEEN 1 AND 100),
      key_id text NOT NULL REFERENCES api_keys (id),
      spend_usd numeric NOT NULL,
      cap_usd numeric NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (subject, period, period_start, threshold_pct)
    )`);
  await knex.raw('ALTER TABLE api_keys ADD COLUMN spend_limits_version integer NOT NULL DEFAULT 0');
  // The keys of a budget (a rotated key and the key it was rotated from), for their reservations.
  await knex.raw('CREATE INDEX api_keys_budget_idx ON api_keys (budget_id) WHERE budget_id IS NOT NULL');
  // What is known already: the months of each key, so a total and a workspace's month start from
  // the spend so far (day and week cannot be told from monthly rows: they start at zero).
  await knex.raw(`
    INSERT INTO budget_spend (subject, period, period_start, spend_usd, usage_count)
    SELECT key_id, 'total', DATE '1970-01-01', sum(spend_usd), sum(usage_count) FROM key_monthly_spend GROUP BY key_id
    UNION ALL
    SELECT k.workspace_id, 'total', DATE '1970-01-01', sum(s.spend_usd), sum(s.usage_count)
      FROM key_monthly_spend s JOIN api_keys k ON k.id = s.key_id GROUP BY k.workspace_id
    UNION ALL
    SELECT k.workspace_id, 'month', s.month, sum(s.spend_usd), sum(s.usage_count)
      FROM key_monthly_spend s JOIN api_keys k ON k.id = s.key_id GROUP BY k.workspace_id, s.month`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX api_keys_budget_idx');
  await knex.raw('ALTER TABLE api_keys DROP COLUMN spend_limits_version');
  await knex.schema.dropTableIfExists('budget_alerts').dropTableIfExists('rate_leases').dropTableIfExists('workspace_leases').dropTableIfExists('budget_spend');
}
