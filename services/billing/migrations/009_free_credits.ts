import type { Knex } from '@switchboard/runtime/db';

/**
 * The free credit granted per user (docs/api/billing.md#free-credit-and-the-sandbox): one row per
 * user, whose primary key is what makes the grant once per user, whatever number of
 * `user.email_verified` events arrive, and however concurrently.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE free_credit_grants (
      user_id text PRIMARY KEY,
      -- A personal workspace has one owner: a second grant to it would be a bug, refused here too.
      workspace_id text NOT NULL UNIQUE REFERENCES accounts (workspace_id),
      amount_usd numeric NOT NULL CHECK (amount_usd > 0),
      granted_at timestamptz NOT NULL DEFAULT now()
    )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('free_credit_grants');
}
