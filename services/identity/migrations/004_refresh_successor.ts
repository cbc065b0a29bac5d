import type { Knex } from 'knex';

/**
 * Successor refresh tokens are derived again when the grace needs them (sessions.ts) from the
 * parent token and a nonce; no reversible copy of a refresh token is stored.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE refresh_tokens DROP COLUMN IF EXISTS successor_encrypted');
  await knex.raw('ALTER TABLE refresh_tokens ADD COLUMN successor_nonce text NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE refresh_tokens DROP COLUMN IF EXISTS successor_nonce');
  await knex.raw('ALTER TABLE refresh_tokens ADD COLUMN successor_encrypted text NULL');
}
