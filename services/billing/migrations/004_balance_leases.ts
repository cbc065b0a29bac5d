import type { Knex } from '@switchboard/runtime/db';

/**
 * Leases on a workspace's balance (docs/money-path.md#leases): slices a data plane replica spends
 * from without a call per request. A lease holds `granted_usd - settled_usd` of the balance until
 * `expires_at`; usage settled against it adds to `settled_usd` in the transaction of its debit.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE balance_leases (
      id text PRIMARY KEY,
      workspace_id text NOT NULL REFERENCES accounts (workspace_id),
      holder text NOT NULL,
      granted_usd numeric NOT NULL CHECK (granted_usd >= 0),
      settled_usd numeric NOT NULL DEFAULT 0 CHECK (settled_usd >= 0),
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
  // A grant sums the unexpired leases of its workspace; housekeeping deletes the long expired.
  await knex.raw('CREATE INDEX balance_leases_workspace_idx ON balance_leases (workspace_id, expires_at)');
  await knex.raw('CREATE INDEX balance_leases_expires_idx ON balance_leases (expires_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('balance_leases');
}
