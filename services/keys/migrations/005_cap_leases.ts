import type { Knex } from '@switchboard/runtime/db';

/**
 * Leases on a key's monthly cap (docs/money-path.md#leases): a data plane replica spends from its
 * lease without asking, and the keys service keeps, under the key's row lock, the month's spend +
 * every unexpired lease's unsettled part + open reservations at or under the cap. Usage that
 * names a lease adds its cost to `settled_usd` in the transaction that adds it to the spend, so
 * the room moves from the lease to the spend at once. Expired leases stay a day for the usage
 * still in flight, then housekeeping deletes them.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE cap_leases (
      id text PRIMARY KEY,
      key_id text NOT NULL REFERENCES api_keys (id),
      month date NOT NULL CHECK (extract(day FROM month) = 1),
      holder text NOT NULL,
      granted_usd numeric NOT NULL CHECK (granted_usd >= 0),
      settled_usd numeric NOT NULL DEFAULT 0 CHECK (settled_usd >= 0),
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
  await knex.raw('CREATE INDEX cap_leases_key_idx ON cap_leases (key_id, month, expires_at)');
  await knex.raw('CREATE INDEX cap_leases_expiry_idx ON cap_leases (expires_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('cap_leases');
}
