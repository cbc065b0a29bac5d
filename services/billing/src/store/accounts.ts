import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// The billing account of each workspace: its balance and plan.

export interface AccountRow {
  workspace_id: string;
  balance_usd: string;
  plan_id: string;
  updated_at: Date;
}

/**
 * Creates the accounts with the opening credit unless they exist (credited once, whoever comes
 * first), in workspace order so that concurrent batches wait for each other instead of deadlocking.
 */
export async function ensureAccounts(db: Db, workspaceIds: string[], openingCreditUsd: string, planId: string): Promise<void> {
  await db.raw(
    `INSERT INTO accounts (workspace_id, balance_usd, plan_id)
     SELECT workspace_id, ?::numeric, ? FROM unnest(?::text[]) AS workspace_id ORDER BY workspace_id ON CONFLICT DO NOTHING`,
    [openingCreditUsd, planId, workspaceIds],
  );
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

/**
 * Locks the accounts for changing their balances, in workspace order (batches touching the same
 * workspaces never deadlock); FOR NO KEY UPDATE lets usage rows referencing them be inserted.
 */
export async function lockAccounts(trx: Knex.Transaction, workspaceIds: string[]): Promise<void> {
  await trx.raw('SELECT workspace_id FROM accounts WHERE workspace_id = ANY (?::text[]) ORDER BY workspace_id FOR NO KEY UPDATE', [workspaceIds]);
}

/** The balance of a workspace after its debit, and the version that debit made. */
export interface Debited extends BalanceChange {
  workspaceId: string;
}

/** Debits each workspace once by its amount; returns the balances after the debits. */
export async function debitAccounts(trx: Knex.Transaction, debits: Array<{ workspaceId: string; amountUsd: string }>): Promise<Debited[]> {
  const { rows } = await trx.raw<{ rows: Array<{ workspace_id: string; balance_usd: string; balance_version: string }> }>(
    `UPDATE accounts a SET balance_usd = a.balance_usd - d.amount, balance_version = a.balance_version + 1, updated_at = now()
       FROM unnest(?::text[], ?::numeric[]) AS d(workspace_id, amount) WHERE a.workspace_id = d.workspace_id
     RETURNING a.workspace_id, a.balance_usd::text, a.balance_version::text`,
    [debits.map((debit) => debit.workspaceId), debits.map((debit) => debit.amountUsd)],
  );
  if (rows.length !== debits.length) throw new Error(`debited ${rows.length} of ${debits.length} billing accounts`);
  return rows.map((row) => ({ workspaceId: row.workspace_id, balanceUsd: row.balance_usd, version: row.balance_version }));
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
