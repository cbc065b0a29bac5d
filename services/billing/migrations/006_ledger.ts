import type { Knex } from '@switchboard/runtime/db';

/**
 * The ledger (docs/api/billing.md#ledger): one entry per change of a balance, written in the
 * transaction of the change, so the entries of a workspace always sum to its balance. Usage is
 * one entry per workspace, UTC day (of the debit) and tier, growing through the day; `seq`
 * orders the list and is renumbered when a usage entry grows, so the newest change is first.
 * Accounts older than the ledger open it with one `adjustment` entry of their balance, whose
 * reference (`beforeTheLedger` of src/store/ledger.ts) also tells that they had their free credit.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE SEQUENCE ledger_entries_seq');
  await knex.raw(`
    CREATE TABLE ledger_entries (
      id text PRIMARY KEY,
      workspace_id text NOT NULL REFERENCES accounts (workspace_id),
      seq bigint NOT NULL DEFAULT nextval('ledger_entries_seq'),
      type text NOT NULL CHECK (type IN ('free_credit', 'topup', 'auto_topup', 'usage', 'refund', 'dispute', 'adjustment', 'plan_fee')),
      amount_usd numeric NOT NULL,
      balance_after_usd numeric NOT NULL,
      reference text NOT NULL,
      usage_day date NULL,
      usage_tier text NULL,
      occurred_at timestamptz NOT NULL DEFAULT now(),
      created_at timestamptz NOT NULL DEFAULT now(),
      CHECK ((type = 'usage') = (usage_day IS NOT NULL AND usage_tier IS NOT NULL))
    )`);
  await knex.raw(`CREATE UNIQUE INDEX ledger_entries_usage_key ON ledger_entries (workspace_id, usage_day, usage_tier) WHERE type = 'usage'`);
  await knex.raw('CREATE INDEX ledger_entries_page_idx ON ledger_entries (workspace_id, seq DESC)');
  await knex.raw('CREATE INDEX ledger_entries_time_idx ON ledger_entries (workspace_id, occurred_at)');
  await knex.raw(`
    INSERT INTO ledger_entries (id, workspace_id, type, amount_usd, balance_after_usd, reference, occurred_at)
    SELECT 'led_' || substr(md5(random()::text || workspace_id), 1, 22), workspace_id, 'adjustment', balance_usd, balance_usd,
           'balance before the ledger', created_at
      FROM accounts`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE ledger_entries');
  await knex.raw('DROP SEQUENCE ledger_entries_seq');
}
