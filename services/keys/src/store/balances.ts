import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// The latest balance billing reported for each workspace (for insufficient_balance).

/**
 * Keeps a reported balance unless a newer one is stored already (events may arrive out of order):
 * newer by billing's balance version, or by time for reports without a version.
 */
export async function recordBalance(trx: Knex.Transaction, workspaceId: string, report: { balanceUsd: string; version: string; asOf: Date }): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: unknown[] }>(
    `INSERT INTO workspace_balances AS b (workspace_id, balance_usd, balance_version, as_of) VALUES (?, ?::numeric, ?::bigint, ?)
     ON CONFLICT (workspace_id) DO UPDATE SET balance_usd = EXCLUDED.balance_usd, balance_version = EXCLUDED.balance_version, as_of = EXCLUDED.as_of
      WHERE EXCLUDED.balance_version > b.balance_version OR (EXCLUDED.balance_version = 0 AND b.balance_version = 0 AND b.as_of <= EXCLUDED.as_of)
     RETURNING workspace_id`,
    [workspaceId, report.balanceUsd, report.version, report.asOf],
  );
  return rows.length === 1;
}

export async function findBalance(db: Db, workspaceId: string): Promise<string | undefined> {
  const row = (await db('workspace_balances').where({ workspace_id: workspaceId }).first(db.raw('balance_usd::text AS balance_usd'))) as
    | { balance_usd: string }
    | undefined;
  return row?.balance_usd;
}
