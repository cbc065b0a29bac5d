import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// The billing account of each workspace: its balance and plan.

export interface AccountRow {
  workspace_id: string;
  balance_usd: string;
  plan_id: string;
  updated_at: Date;
}

/** Creates the account with the free credit unless it exists (credited once, whoever comes first). */
export async function ensureAccount(db: Db, workspaceId: string, freeCreditUsd: string, planId: string): Promise<void> {
  await db.raw('INSERT INTO accounts (workspace_id, balance_usd, plan_id) VALUES (?, ?::numeric, ?) ON CONFLICT DO NOTHING', [
    workspaceId,
    freeCreditUsd,
    planId,
  ]);
}

export async function findAccount(db: Db, workspaceId: string): Promise<AccountRow | undefined> {
  return db('accounts').where({ workspace_id: workspaceId }).first('workspace_id', db.raw('balance_usd::text AS balance_usd'), 'plan_id', 'updated_at');
}

/**
 * The account, its row locked until the transaction ends: what serializes every change of the
 * workspace's balance and of its leases.
 */
export async function lockAccount(trx: Knex.Transaction, workspaceId: string): Promise<AccountRow | undefined> {
  const { rows } = await trx.raw<{ rows: AccountRow[] }>(
    'SELECT workspace_id, balance_usd::text AS balance_usd, plan_id, updated_at FROM accounts WHERE workspace_id = ? FOR UPDATE',
    [workspaceId],
  );
  return rows[0];
}

/** A balance after a change, and the version of the account that change made. */
export interface BalanceChange {
  balanceUsd: string;
  version: string;
}

/** Adds `deltaUsd` (negative: a debit) to the balance; returns the new balance and version. */
export async function adjustBalance(trx: Knex.Transaction, workspaceId: string, deltaUsd: string): Promise<BalanceChange> {
  const { rows } = await trx.raw<{ rows: Array<{ balance_usd: string; balance_version: string }> }>(
    `UPDATE accounts SET balance_usd = balance_usd + ?::numeric, balance_version = balance_version + 1, updated_at = now()
      WHERE workspace_id = ? RETURNING balance_usd::text, balance_version::text`,
    [deltaUsd, workspaceId],
  );
  if (rows.length !== 1) throw new Error(`no billing account for ${workspaceId}`);
  return { balanceUsd: rows[0].balance_usd, version: rows[0].balance_version };
}
