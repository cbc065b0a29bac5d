import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// The latest balance billing reported for each workspace (for insufficient_balance).

/** Keeps the report of `asOf` unless a later one is stored already (events may arrive out of order). */
export async function recordBalance(trx: Knex.Transaction, workspaceId: string, balanceUsd: string, asOf: Date): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: unknown[] }>(
    `INSERT INTO workspace_balances AS b (workspace_id, balance_usd, as_of) VALUES (?, ?::numeric, ?)
     ON CONFLICT (workspace_id) DO UPDATE SET balance_usd = EXCLUDED.balance_usd, as_of = EXCLUDED.as_of WHERE b.as_of <= EXCLUDED.as_of
     RETURNING workspace_id`,
    [workspaceId, balanceUsd, asOf],
  );
  return rows.length === 1;
}

export async function findBalance(db: Db, workspaceId: string): Promise<string | undefined> {
  const row = (await db('workspace_balances').where({ workspace_id: workspaceId }).first(db.raw('balance_usd::text AS balance_usd'))) as
    | { balance_usd: string }
    | undefined;
  return row?.balance_usd;
}
