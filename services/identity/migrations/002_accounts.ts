import type { Knex } from '@switchboard/runtime/db';

/**
 * Account management (issue 3): refresh-token rotation with a grace successor, password resets,
 * TOTP two-factor authentication with recovery codes, sign-in challenges, brute-force counters
 * and deactivation/erasure.
 */
export async function up(knex: Knex): Promise<void> {
  // Rotation: when a token is used, its successor is kept encrypted (AES-256-GCM) on the used
  // token's row, so the immediate parent reused within 10 s gets the same successor (tabs).
  await knex.raw('ALTER TABLE refresh_tokens ADD COLUMN successor_hash text NULL');
  await knex.raw('ALTER TABLE refresh_tokens ADD COLUMN successor_encrypted text NULL');
  await knex.raw('CREATE INDEX sessions_revoked_idx ON sessions (revoked_at) WHERE revoked_at IS NOT NULL');

  await knex.raw('ALTER TABLE users ADD COLUMN erase_after timestamptz NULL');
  await knex.raw('ALTER TABLE users ADD COLUMN erased_at timestamptz NULL');
  await knex.raw('CREATE INDEX users_erase_due_idx ON users (erase_after) WHERE erase_after IS NOT NULL AND erased_at IS NULL');

  await knex.raw(`
    CREATE TABLE password_resets (
      -- SHA-256 (hex) of the mailed token; single use, 1 hour.
      token_hash text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      used_at timestamptz NULL
    )`);
  await knex.raw('CREATE INDEX password_resets_user_idx ON password_resets (user_id)');

  await knex.raw(`
    CREATE TABLE two_factor (
      user_id text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
      -- The active TOTP secret (160 bits), AES-256-GCM encrypted; null until activated.
      secret_encrypted text NULL,
      enabled_at timestamptz NULL,
      -- An enrollment waiting for its first code.
      pending_secret_encrypted text NULL,
      -- The last accepted RFC 6238 time step: a code of this step or an earlier one is refused.
      last_used_step bigint NULL
    )`);

  await knex.raw(`
    CREATE TABLE recovery_codes (
      user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      -- SHA-256 (hex) of the normalized code (100 random bits).
      code_hash text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      used_at timestamptz NULL,
      PRIMARY KEY (user_id, code_hash)
    )`);

  await knex.raw(`
    CREATE TABLE mfa_challenges (
      -- SHA-256 (hex) of the mfa_token handed out at password sign-in.
      token_hash text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      used_at timestamptz NULL
    )`);

  await knex.raw(`
    CREATE TABLE auth_failures (
      id bigserial PRIMARY KEY,
      -- password or second_factor.
      kind text NOT NULL,
      -- account (normalized email or user id) or ip.
      scope text NOT NULL,
      subject text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
  await knex.raw('CREATE INDEX auth_failures_lookup_idx ON auth_failures (kind, scope, subject, created_at)');
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['auth_failures', 'mfa_challenges', 'recovery_codes', 'two_factor', 'password_resets']) {
    await knex.raw(`DROP TABLE IF EXISTS ${table}`);
  }
  await knex.raw('DROP INDEX IF EXISTS sessions_revoked_idx');
  await knex.raw('ALTER TABLE users DROP COLUMN IF EXISTS erase_after, DROP COLUMN IF EXISTS erased_at');
  await knex.raw('ALTER TABLE refresh_tokens DROP COLUMN IF EXISTS successor_hash, DROP COLUMN IF EXISTS successor_encrypted');
}
