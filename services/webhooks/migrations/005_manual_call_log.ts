import type { Knex } from '@switchboard/runtime/db';

/**
 * The times of an endpoint's recent manual calls (test, redeliver, recover) for their rate limit
 * (docs/webhooks.md#limits): at most the limit's worth of the last minute is kept, on the row
 * each of those calls locks anyway, so counting them costs no table and no pruning of its own.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE endpoints ADD COLUMN manual_calls timestamptz[] NOT NULL DEFAULT '{}'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE endpoints DROP COLUMN manual_calls');
}
