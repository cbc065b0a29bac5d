import { createIndexesConcurrently, type Knex } from '@switchboard/runtime/db';

/**
 * What retention reads by age (src/retention.ts, docs/webhooks.md#retention): deliveries and
 * events by creation, attempts that still keep a response body, so each batch walks on from
 * where the last one stopped in an index (created_at, id) instead of scanning its table. Built concurrently: these tables were kept
 * since the first delivery, and a plain CREATE INDEX would hold up intake and claims meanwhile.
 */
export const config = { transaction: false };

export async function up(knex: Knex): Promise<void> {
  await createIndexesConcurrently(knex, [
    { name: 'deliveries_created_idx', on: 'deliveries (created_at, id)' },
    { name: 'events_created_idx', on: 'events (created_at, id)' },
    { name: 'attempts_body_created_idx', on: 'attempts (created_at, id) WHERE response_body IS NOT NULL' },
  ]);
}

export async function down(knex: Knex): Promise<void> {
  for (const name of ['attempts_body_created_idx', 'events_created_idx', 'deliveries_created_idx']) {
    await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS ??', [name]);
  }
}
