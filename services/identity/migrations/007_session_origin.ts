import type { Knex } from 'knex';

/**
 * Where a session was opened (docs/api/identity.md#signed-in-sessions): the client address and
 * user agent the gateway saw at sign-in, shown in the user's list of sessions so an unknown one
 * stands out. Both are personal data: erased with the account, gone with the pruned session.
 * The list reads the user's active sessions newest first.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE sessions ADD COLUMN ip text NULL, ADD COLUMN user_agent text NULL');
  await knex.raw('CREATE INDEX sessions_user_created_idx ON sessions (user_id, created_at DESC, id DESC) WHERE revoked_at IS NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS sessions_user_created_idx');
  await knex.raw('ALTER TABLE sessions DROP COLUMN IF EXISTS ip, DROP COLUMN IF EXISTS user_agent');
}
