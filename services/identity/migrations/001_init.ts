import type { Knex } from '@switchboard/runtime/db';
import { createOutboxTables, dropOutboxTables } from '@switchboard/runtime/outbox';

/**
 * Accounts, workspaces, memberships, sessions, refresh tokens, email verification tokens and
 * the access-token signing keys. Tables live in the `identity` schema (the search_path).
 */
export async function up(knex: Knex): Promise<void> {
  await createOutboxTables(knex);

  await knex.raw(`
    CREATE TABLE organizations (
      id text PRIMARY KEY,
      name text NOT NULL,
      personal boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);

  await knex.raw(`
    CREATE TABLE users (
      id text PRIMARY KEY,
      -- Trimmed and lower-cased at the edge; one account per address.
      email text NOT NULL CONSTRAINT users_email_key UNIQUE,
      email_verified_at timestamptz NULL,
      full_name text NULL,
      -- argon2id PHC string: the parameters travel with the hash (rehash on login when they change).
      password_hash text NOT NULL,
      password_changed_at timestamptz NOT NULL DEFAULT now(),
      two_factor_enabled boolean NOT NULL DEFAULT false,
      personal_workspace_id text NOT NULL REFERENCES organizations (id),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      deactivated_at timestamptz NULL
    )`);

  await knex.raw(`
    CREATE TABLE memberships (
      org_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
      user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      role text NOT NULL CHECK (role IN ('owner', 'admin', 'developer')),
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (org_id, user_id)
    )`);
  // One owner per organization (docs/api/identity.md#members).
  await knex.raw(`CREATE UNIQUE INDEX memberships_one_owner ON memberships (org_id) WHERE role = 'owner'`);
  await knex.raw('CREATE INDEX memberships_user_idx ON memberships (user_id, org_id)');

  await knex.raw(`
    CREATE TABLE sessions (
      id text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      -- Authenticator assurance level of the sign-in: aal1 (password) or aal2 (second factor).
      aal text NOT NULL DEFAULT 'aal1',
      created_at timestamptz NOT NULL DEFAULT now(),
      last_used_at timestamptz NOT NULL DEFAULT now(),
      -- Absolute end of the session (30 days); idle expiry is counted from last_used_at.
      expires_at timestamptz NOT NULL,
      revoked_at timestamptz NULL,
      revoked_reason text NULL
    )`);
  await knex.raw('CREATE INDEX sessions_user_idx ON sessions (user_id) WHERE revoked_at IS NULL');

  await knex.raw(`
    CREATE TABLE refresh_tokens (
      -- SHA-256 (hex) of the opaque token; the token itself is never stored.
      token_hash text PRIMARY KEY,
      session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
      -- The token this one replaced at rotation (null for the first of a session).
      parent_hash text NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      used_at timestamptz NULL
    )`);
  await knex.raw('CREATE INDEX refresh_tokens_session_idx ON refresh_tokens (session_id)');
  await knex.raw('CREATE INDEX refresh_tokens_parent_idx ON refresh_tokens (parent_hash) WHERE parent_hash IS NOT NULL');

  await knex.raw(`
    CREATE TABLE email_verifications (
      token_hash text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      -- The address the token proves (the account's email may change later).
      email text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      used_at timestamptz NULL
    )`);
  await knex.raw('CREATE INDEX email_verifications_user_idx ON email_verifications (user_id)');

  await knex.raw(`
    CREATE TABLE signing_keys (
      -- RFC 7638 thumbprint of the public key.
      kid text PRIMARY KEY,
      alg text NOT NULL,
      public_jwk jsonb NOT NULL,
      -- The private JWK, AES-256-GCM encrypted (runtime/src/secrets.ts); never plaintext.
      private_jwk_encrypted text NOT NULL,
      status text NOT NULL CHECK (status IN ('active', 'retired')),
      created_at timestamptz NOT NULL DEFAULT now(),
      retired_at timestamptz NULL
    )`);
  // At most one active key: replicas starting together converge on the first one inserted.
  await knex.raw(`CREATE UNIQUE INDEX signing_keys_one_active ON signing_keys ((status)) WHERE status = 'active'`);
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['signing_keys', 'email_verifications', 'refresh_tokens', 'sessions', 'memberships', 'users', 'organizations']) {
    await knex.raw(`DROP TABLE IF EXISTS ${table}`);
  }
  await dropOutboxTables(knex);
}
