import type { Knex } from '@switchboard/runtime/db';

/**
 * Generations (docs/api/generations.md): the facts the data plane reports beside the usage (null
 * for rows recorded before it did, or through RecordUsage), the keyset indexes of the list (per
 * workspace and per key, newest first; the first also serves the reports' time ranges, so it
 * replaces their index: a settled row updates one index more, not two), and the feedback
 * projected from `feedback.recorded`, keyed by generation and kept apart so that a rating
 * arriving before its usage row waits there.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE usage_records
      ADD COLUMN region text NULL,
      ADD COLUMN streamed boolean NULL,
      ADD COLUMN status text NULL CHECK (status IN ('completed', 'client_closed', 'upstream_error')),
      ADD COLUMN latency_ms integer NULL CHECK (latency_ms >= 0),
      ADD COLUMN time_to_first_token_ms integer NULL CHECK (time_to_first_token_ms >= 0),
      ADD COLUMN overhead_ms numeric(13, 3) NULL CHECK (overhead_ms >= 0),
      ADD COLUMN conversation_id text NULL`);
  await knex.raw('CREATE INDEX usage_records_workspace_page_idx ON usage_records (workspace_id, occurred_at DESC, id DESC)');
  await knex.raw('CREATE INDEX usage_records_key_page_idx ON usage_records (workspace_id, key_id, occurred_at DESC, id DESC)');
  await knex.raw('DROP INDEX usage_records_workspace_time_idx');

  await knex.raw(`
    CREATE TABLE generation_feedback (
      generation_id text PRIMARY KEY,
      workspace_id text NOT NULL,
      feedback_id text NOT NULL,
      rating smallint NOT NULL CHECK (rating IN (1, -1)),
      tags jsonb NOT NULL DEFAULT '[]',
      -- The event's time: a rating older than the one stored never replaces it.
      rated_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('generation_feedback');
  await knex.raw('CREATE INDEX usage_records_workspace_time_idx ON usage_records (workspace_id, occurred_at)');
  await knex.raw('DROP INDEX IF EXISTS usage_records_key_page_idx');
  await knex.raw('DROP INDEX IF EXISTS usage_records_workspace_page_idx');
  await knex.raw(`
    ALTER TABLE usage_records DROP COLUMN region, DROP COLUMN streamed, DROP COLUMN status, DROP COLUMN latency_ms,
      DROP COLUMN time_to_first_token_ms, DROP COLUMN overhead_ms, DROP COLUMN conversation_id`);
}
