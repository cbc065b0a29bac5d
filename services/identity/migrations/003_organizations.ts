import type { Knex } from '@switchboard/runtime/db';

/**
 * Organizations beyond the personal workspace (issue 4): invitations, and the indexes the
 * organization and member lists page on. Independent of 002 (accounts), so either may run first.
 * The one-owner rule is the unique partial index `memberships_one_owner` of 001.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE invitations (
      id text PRIMARY KEY,
      org_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
      -- Trimmed and lower-cased; the accepting account's email must equal it.
      email text NOT NULL,
      -- Never 'owner': ownership moves only by transfer.
      role text NOT NULL CHECK (role IN ('admin', 'developer')),
      -- SHA-256 (hex) of the mailed token; the token itself is never stored.
      token_hash text NOT NULL CONSTRAINT invitations_token_hash_key UNIQUE,
      invited_by text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      accepted_at timestamptz NULL,
      accepted_by text NULL REFERENCES users (id) ON DELETE SET NULL,
      revoked_at timestamptz NULL,
      revoked_by text NULL REFERENCES users (id) ON DELETE SET NULL,
      CHECK (accepted_at IS NULL OR revoked_at IS NULL)
    )`);
  await knex.raw('CREATE INDEX invitations_org_idx ON invitations (org_id, created_at DESC, id DESC)');

  await knex.raw('CREATE INDEX memberships_user_page_idx ON memberships (user_id, created_at DESC, org_id DESC)');
  await knex.raw('CREATE INDEX memberships_org_page_idx ON memberships (org_id, created_at DESC, user_id DESC)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS memberships_org_page_idx');
  await knex.raw('DROP INDEX IF EXISTS memberships_user_page_idx');
  await knex.raw('DROP TABLE IF EXISTS invitations');
}
