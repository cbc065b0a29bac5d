import type { Knex } from '@switchboard/runtime/db';

// The free credit granted per user: at most one row per user.

/**
 * Records the grant of `userId` unless one exists; true when this call recorded it. A concurrent
 * grant for the same user waits here (the primary key) until the first transaction ends, then
 * finds it recorded.
 */
export async function insertFreeCreditGrant(trx: Knex.Transaction, grant: { userId: string; workspaceId: string; amountUsd: string }): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: unknown[] }>(
    'INSERT INTO free_credit_grants (user_id, workspace_id, amount_usd) VALUES (?, ?, ?::numeric) ON CONFLICT (user_id) DO NOTHING RETURNING user_id',
    [grant.userId, grant.workspaceId, grant.amountUsd],
  );
  return rows.length === 1;
}
