import type { Knex } from '@switchboard/runtime/db';

/**
 * Balances and plans per workspace, priced usage (one row per generation), and top-ups with the
 * provider events already applied. Money is `numeric` without a scale: costs stay unrounded.
 */
export async function up(knex: Knex): Promise<void> {
  // Created on first touch (a usage, a read, organization.created) with the free credit.
  await knex.raw(`
    CREATE TABLE accounts (
      workspace_id text PRIMARY KEY,
      balance_usd numeric NOT NULL,
      -- +1 on every change of the balance: the order of the balances the events report.
      balance_version bigint NOT NULL DEFAULT 0,
      plan_id text NOT NULL DEFAULT 'payg',
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);

  // The generation registry: generation_id is the idempotency key of RecordUsage.
  await knex.raw(`
    CREATE TABLE usage_records (
      id text PRIMARY KEY,
      generation_id text NOT NULL CONSTRAINT usage_records_generation_id_key UNIQUE,
      workspace_id text NOT NULL REFERENCES accounts (workspace_id),
      key_id text NOT NULL,
      model text NOT NULL,
      routed_model text NULL,
      tier text NOT NULL CHECK (tier IN ('fast', 'balanced', 'passthrough', 'byok')),
      input_tokens bigint NOT NULL CHECK (input_tokens >= 0),
      output_tokens bigint NOT NULL CHECK (output_tokens >= 0),
      upstream_cost_usd numeric NULL CHECK (upstream_cost_usd >= 0),
      cost_usd numeric NOT NULL CHECK (cost_usd >= 0),
      plan_id text NOT NULL,
      pricing_version text NOT NULL,
      reservation_id text NULL,
      occurred_at timestamptz NOT NULL,
      recorded_at timestamptz NOT NULL DEFAULT now()
    )`);
  await knex.raw('CREATE INDEX usage_records_workspace_time_idx ON usage_records (workspace_id, occurred_at)');

  await knex.raw(`
    CREATE TABLE checkouts (
      id text PRIMARY KEY,
      workspace_id text NOT NULL REFERENCES accounts (workspace_id),
      idempotency_key text NOT NULL,
      amount_usd numeric NOT NULL CHECK (amount_usd > 0),
      provider text NOT NULL CHECK (provider IN ('sandbox', 'stripe')),
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'completed', 'expired', 'failed')),
      -- Stripe: the hosted page. Sandbox: null, the URL is derived again from the id (it holds
      -- the page token, which is not stored).
      checkout_url text NULL,
      -- Sandbox: SHA-256 (hex) of the page token (the capability), and the data key it was derived with.
      token_hash text NULL CONSTRAINT checkouts_token_hash_key UNIQUE,
      token_key_id text NULL,
      -- Stripe: the Checkout Session id.
      provider_session_id text NULL CONSTRAINT checkouts_provider_session_id_key UNIQUE,
      created_by text NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      completed_at timestamptz NULL,
      CONSTRAINT checkouts_idempotency_key UNIQUE (workspace_id, idempotency_key)
    )`);
  await knex.raw('CREATE INDEX checkouts_workspace_page_idx ON checkouts (workspace_id, created_at DESC, id DESC)');

  // Provider events applied (a replayed Stripe event credits nothing).
  await knex.raw(`
    CREATE TABLE provider_events (
      provider text NOT NULL,
      event_id text NOT NULL,
      received_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (provider, event_id)
    )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('provider_events').dropTableIfExists('checkouts').dropTableIfExists('usage_records').dropTableIfExists('accounts');
}
