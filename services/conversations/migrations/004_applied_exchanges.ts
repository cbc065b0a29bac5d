import type { Knex } from '@switchboard/runtime/db';

/**
 * The exchanges of the work stream already appended, by generation (src/exchange-appends.ts): a
 * record delivered again appends nothing. A row goes with its conversation.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE applied_exchanges (
      generation_id text PRIMARY KEY,
      conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
  await knex.raw('CREATE INDEX applied_exchanges_conversation_idx ON applied_exchanges (conversation_id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('applied_exchanges');
}
