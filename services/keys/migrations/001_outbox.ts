import { createOutboxTables } from '@switchboard/runtime/outbox';
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await createOutboxTables(knex);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('processed_events').dropTableIfExists('outbox');
}
