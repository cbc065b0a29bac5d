import type { Knex } from 'knex';

/**
 * A sign-in attempt is written as a failure before its secret is checked (login-throttle.ts);
 * until it is settled as a failure it counts only while `pending_until` is ahead, so an attempt
 * whose process died mid-check (kill -9, OOM) stops counting instead of locking the account.
 * NULL: a settled failure, or a row of the action limits (always counted).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE auth_failures ADD COLUMN pending_until timestamptz NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE auth_failures DROP COLUMN IF EXISTS pending_until');
}
