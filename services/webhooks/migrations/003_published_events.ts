import type { Knex } from '@switchboard/runtime/db';

/** PublishEvent's idempotency keys: a retried publish answers the event it made the first time. */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE published_events (
      workspace_id text NOT NULL,
      idempotency_key text NOT NULL,
      event_id text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (workspace_id, idempotency_key)
    )`);
  await knex.raw('CREATE INDEX published_events_created_idx ON published_events (created_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('published_events');
}
