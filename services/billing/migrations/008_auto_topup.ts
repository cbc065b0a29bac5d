import type { Knex } from '@switchboard/runtime/db';

/**
 * Auto top-up (docs/api/billing.md#auto-top-up): the settings of each workspace, and the
 * off-session charges a crossing of the threshold starts. A charge's id (`atp_…`) is the
 * provider's idempotency key: however often it is attempted, the card is charged at most once.
 */
export async function up(knex: Knex): Promise<void> {
  // A row once the settings were first saved; none reads as switched off with nothing set.
  await knex.raw(`
    CREATE TABLE auto_topups (
      workspace_id text PRIMARY KEY REFERENCES accounts (workspace_id),
      enabled boolean NOT NULL DEFAULT false,
      threshold_usd numeric NULL CHECK (threshold_usd > 0),
      amount_usd numeric NULL CHECK (amount_usd > 0),
      monthly_limit_usd numeric NULL CHECK (monthly_limit_usd > 0),
      low_balance_threshold_usd numeric NULL CHECK (low_balance_threshold_usd > 0),
      -- Failed charges since the last successful one; at 3 the service switches auto top-up off.
      consecutive_failures integer NOT NULL DEFAULT 0,
      disabled_reason text NULL CHECK (disabled_reason IN ('charge_failures', 'payment_method_removed')),
      updated_by text NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      CHECK (NOT enabled OR (threshold_usd IS NOT NULL AND amount_usd IS NOT NULL AND monthly_limit_usd IS NOT NULL)),
      CHECK (monthly_limit_usd IS NULL OR amount_usd IS NULL OR monthly_limit_usd >= amount_usd)
    )`);

  await knex.raw(`
    CREATE TABLE auto_topup_charges (
      id text PRIMARY KEY,
      workspace_id text NOT NULL REFERENCES accounts (workspace_id),
      amount_usd numeric NOT NULL CHECK (amount_usd > 0),
      -- The first day of the calendar month (UTC) the charge counts against for the monthly limit.
      month date NOT NULL,
      provider text NOT NULL CHECK (provider IN ('sandbox', 'stripe')),
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
      -- The saved method charged, pinned at the first attempt: every retry sends the provider the
      -- same request under the same idempotency key.
      payment_method_id text NULL,
      provider_method_id text NULL,
      provider_customer_id text NULL,
      provider_payment_id text NULL,
      failure_reason text NULL,
      attempts integer NOT NULL DEFAULT 0,
      -- A worker holds a pending charge until then (a lease: a replica that died lets it go).
      claimed_until timestamptz NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      completed_at timestamptz NULL
    )`);
  // Never two charges at once: one pending charge per workspace, whatever the concurrency.
  await knex.raw(`CREATE UNIQUE INDEX auto_topup_charges_one_pending ON auto_topup_charges (workspace_id) WHERE status = 'pending'`);
  await knex.raw('CREATE INDEX auto_topup_charges_month_idx ON auto_topup_charges (workspace_id, month)');
  await knex.raw(`CREATE INDEX auto_topup_charges_pending_idx ON auto_topup_charges (created_at) WHERE status = 'pending'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('auto_topup_charges').dropTableIfExists('auto_topups');
}
