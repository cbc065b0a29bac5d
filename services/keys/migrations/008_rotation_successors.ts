import type { Knex } from '@switchboard/runtime/db';

/** A key's successors by `rotated_from`: a rotated key is not rotated again while one is active (docs/api/keys.md#rotation). */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX api_keys_rotated_from_idx ON api_keys (rotated_from) WHERE rotated_from IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX api_keys_rotated_from_idx');
}
