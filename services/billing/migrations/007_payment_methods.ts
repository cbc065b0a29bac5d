import type { Knex } from '@switchboard/runtime/db';

/**
 * Saved payment methods and what refunds and disputes are checked against (docs/api/billing.md#payment-methods):
 * the Stripe Customer of each workspace, the setups (a page where the user saves a card), the
 * saved methods, and the provider payments that credited a balance with what was taken back of
 * each (refunds, lost disputes).
 */
export async function up(knex: Knex): Promise<void> {
  // One Stripe Customer per workspace, created once (the saved cards hang off it).
  await knex.raw(`
    CREATE TABLE provider_customers (
      workspace_id text NOT NULL,
      provider text NOT NULL CHECK (provider IN ('stripe')),
      customer_id text NOT NULL CONSTRAINT provider_customers_customer_id_key UNIQUE,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (workspace_id, provider)
    )`);

  await knex.raw(`
    CREATE TABLE payment_method_setups (
      id text PRIMARY KEY,
      workspace_id text NOT NULL REFERENCES accounts (workspace_id),
      provider text NOT NULL CHECK (provider IN ('sandbox', 'stripe')),
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'completed')),
      -- Stripe: the hosted page. Sandbox: null, derived again from the id (like checkouts).
      setup_url text NULL,
      token_hash text NULL CONSTRAINT payment_method_setups_token_hash_key UNIQUE,
      token_key_id text NULL,
      provider_session_id text NULL CONSTRAINT payment_method_setups_provider_session_id_key UNIQUE,
      -- The method the setup saved (kept when the method is removed later).
      payment_method_id text NULL,
      created_by text NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      completed_at timestamptz NULL
    )`);

  await knex.raw(`
    CREATE TABLE payment_methods (
      id text PRIMARY KEY,
      workspace_id text NOT NULL REFERENCES accounts (workspace_id),
      provider text NOT NULL CHECK (provider IN ('sandbox', 'stripe')),
      provider_method_id text NOT NULL,
      provider_customer_id text NULL,
      brand text NOT NULL,
      last4 text NOT NULL,
      exp_month integer NOT NULL,
      exp_year integer NOT NULL,
      setup_id text NULL CONSTRAINT payment_methods_setup_id_key UNIQUE,
      created_by text NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT payment_methods_provider_method_key UNIQUE (provider, provider_method_id)
    )`);
  await knex.raw('CREATE INDEX payment_methods_workspace_idx ON payment_methods (workspace_id, created_at DESC, id DESC)');

  // A payment that credited a balance (a Stripe PaymentIntent, a sandbox charge): what a refund
  // or a lost dispute of it is debited against, at most once per amount.
  await knex.raw(`
    CREATE TABLE provider_payments (
      provider_payment_id text PRIMARY KEY,
      workspace_id text NOT NULL REFERENCES accounts (workspace_id),
      -- The checkout or auto top-up charge it paid.
      topup_id text NOT NULL,
      amount_usd numeric NOT NULL CHECK (amount_usd > 0),
      -- The provider's cumulative refunded amount seen so far (debited already).
      refunded_usd numeric NOT NULL DEFAULT 0 CHECK (refunded_usd >= 0),
      disputed_usd numeric NOT NULL DEFAULT 0 CHECK (disputed_usd >= 0),
      created_at timestamptz NOT NULL DEFAULT now()
    )`);

  // Lost disputes debited (one debit per dispute, whatever is redelivered).
  await knex.raw(`
    CREATE TABLE provider_disputes (
      dispute_id text PRIMARY KEY,
      provider_payment_id text NOT NULL REFERENCES provider_payments (provider_payment_id),
      amount_usd numeric NOT NULL,
      debited_at timestamptz NOT NULL DEFAULT now()
    )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema
    .dropTableIfExists('provider_disputes')
    .dropTableIfExists('provider_payments')
    .dropTableIfExists('payment_methods')
    .dropTableIfExists('payment_method_setups')
    .dropTableIfExists('provider_customers');
}
