import type { Knex } from '@switchboard/runtime/db';

/**
 * Self-service data exports (docs/api/identity.md#data-export): one row per request, built in
 * the background. The document is encrypted under the data keys (purpose `identity.data-export`,
 * re-encrypted by `--rotate-data-key`) and deleted by the sweeper 7 days after it was ready; the
 * row stays, so its link answers 410. At most one pending export per user (partial unique index).
 * `next_attempt_at` is both the retry back-off and the lease of a build in progress.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE data_exports (
      id text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'ready', 'failed', 'expired')),
      document_encrypted text NULL,
      document_bytes integer NULL,
      attempts integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz NOT NULL,
      last_error text NULL,
      created_at timestamptz NOT NULL,
      ready_at timestamptz NULL,
      expires_at timestamptz NULL
    )`);
  await knex.raw(`CREATE UNIQUE INDEX data_exports_one_pending ON data_exports (user_id) WHERE status = 'pending'`);
  await knex.raw(`CREATE INDEX data_exports_due_idx ON data_exports (next_attempt_at) WHERE status = 'pending'`);
  await knex.raw(`CREATE INDEX data_exports_expiry_idx ON data_exports (expires_at) WHERE status = 'ready'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('data_exports');
}
