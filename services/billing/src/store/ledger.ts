import type { Knex } from '@switchboard/runtime/db';
import type { Cursor } from '@switchboard/runtime/pagination';
import type { Db } from '@switchboard/runtime/sql';

// The ledger: one entry per change of a balance (usage: one per workspace, UTC day and tier).

export interface LedgerRow {
  id: string;
  seq: string;
  type: string;
  amount_usd: string;
  balance_after_usd: string;
  reference: string;
  occurred_at: Date;
}

/**
 * The reference of the entry that opened the ledger of an account older than it (migration 006):
 * such an account was opened with the free credit of the time, per workspace.
 */
export const beforeTheLedger = 'balance before the ledger';

/** Whether the account existed before the ledger (it had its free credit when it opened). */
export async function openedBeforeTheLedger(db: Db, workspaceId: string): Promise<boolean> {
  const { rows } = await db.raw<{ rows: unknown[] }>(`SELECT 1 FROM ledger_entries WHERE workspace_id = ? AND type = 'adjustment' AND reference = ? LIMIT 1`, [
    workspaceId,
    beforeTheLedger,
  ]);
  return rows.length > 0;
}

export interface NewEntry {
  id: string;
  workspaceId: string;
  type: string;
  amountUsd: string;
  balanceAfterUsd: string;
  reference: string;
}

export async function insertEntry(trx: Knex.Transaction, entry: NewEntry): Promise<Date> {
  const { rows } = await trx.raw<{ rows: Array<{ occurred_at: Date }> }>(
    `INSERT INTO ledger_entries (id, workspace_id, type, amount_usd, balance_after_usd, reference)
     VALUES (?, ?, ?, ?::numeric, ?::numeric, ?) RETURNING occurred_at`,
    [entry.id, entry.workspaceId, entry.type, entry.amountUsd, entry.balanceAfterUsd, entry.reference],
  );
  return rows[0].occurred_at;
}

/**
 * Adds debits (positive amounts) to today's usage entries (UTC, by the database's clock), one per
 * workspace and tier, creating them as needed; each entry's balance after becomes `balanceAfterUsd`.
 */
export async function addUsageEntries(
  trx: Knex.Transaction,
  debits: Array<{ id: string; workspaceId: string; tier: string; amountUsd: string; balanceAfterUsd: string }>,
): Promise<void> {
  if (debits.length === 0) return;
  await trx.raw(
    `INSERT INTO ledger_entries AS l (id, workspace_id, type, amount_usd, balance_after_usd, reference, usage_day, usage_tier)
     SELECT d.id, d.workspace_id, 'usage', -d.amount, d.balance_after, 'usage:' || to_char(t.day, 'YYYY-MM-DD') || ':' || d.tier, t.day, d.tier
       FROM unnest(?::text[], ?::text[], ?::text[], ?::numeric[], ?::numeric[]) AS d(id, workspace_id, tier, amount, balance_after),
            (SELECT (now() AT TIME ZONE 'UTC')::date AS day) AS t
      ORDER BY d.workspace_id, d.tier
     ON CONFLICT (workspace_id, usage_day, usage_tier) WHERE type = 'usage'
     DO UPDATE SET amount_usd = l.amount_usd + excluded.amount_usd, balance_after_usd = excluded.balance_after_usd,
                   occurred_at = now(), seq = nextval('ledger_entries_seq')`,
    [
      debits.map((d) => d.id),
      debits.map((d) => d.workspaceId),
      debits.map((d) => d.tier),
      debits.map((d) => d.amountUsd),
      debits.map((d) => d.balanceAfterUsd),
    ],
  );
}

const entryColumns = 'id, seq::text AS seq, type, amount_usd::text AS amount_usd, balance_after_usd::text AS balance_after_usd, reference, occurred_at';

/** A page of the workspace's entries, newest change first (`limit + 1` rows: pageOf splits them). */
export async function listEntries(db: Db, workspaceId: string, page: { limit: number; after?: Cursor }): Promise<LedgerRow[]> {
  const { rows } = await db.raw<{ rows: LedgerRow[] }>(
    `SELECT ${entryColumns} FROM ledger_entries
      WHERE workspace_id = ? ${page.after ? 'AND seq < ?::bigint' : ''}
      ORDER BY ledger_entries.seq DESC LIMIT ?`,
    page.after ? [workspaceId, page.after.micros, page.limit + 1] : [workspaceId, page.limit + 1],
  );
  return rows;
}

export interface StatementRow {
  opening: string;
  credits: string;
  usage: string;
  fast: string;
  balanced: string;
  passthrough: string;
  byok: string;
  refunds: string;
  closing: string;
}

/**
 * A month's sums from one snapshot: the opening balance is the sum of every entry before `from`,
 * the closing one of every entry before `to`; the entries between are credits, usage (and plan
 * fees) and refunds (and lost disputes), so opening + credits − usage − refunds = closing.
 */
export async function statementSums(db: Db, workspaceId: string, from: Date, to: Date): Promise<StatementRow> {
  const inMonth = 'occurred_at >= ? AND occurred_at < ?';
  const sum = (filter: string, negate = false) => `COALESCE(${negate ? '-' : ''}sum(amount_usd) FILTER (WHERE ${inMonth} AND ${filter}), 0)::text`;
  const { rows } = await db.raw<{ rows: StatementRow[] }>(
    `SELECT COALESCE(sum(amount_usd) FILTER (WHERE occurred_at < ?), 0)::text AS opening,
            ${sum(`type IN ('free_credit', 'topup', 'auto_topup', 'adjustment')`)} AS credits,
            ${sum(`type IN ('usage', 'plan_fee')`, true)} AS usage,
            ${sum(`usage_tier = 'fast'`, true)} AS fast,
            ${sum(`usage_tier = 'balanced'`, true)} AS balanced,
            ${sum(`usage_tier = 'passthrough'`, true)} AS passthrough,
            ${sum(`usage_tier = 'byok'`, true)} AS byok,
            ${sum(`type IN ('refund', 'dispute')`, true)} AS refunds,
            COALESCE(sum(amount_usd) FILTER (WHERE occurred_at < ?), 0)::text AS closing
       FROM ledger_entries WHERE workspace_id = ? AND occurred_at < ?`,
    [from, ...Array(7).fill([from, to]).flat(), to, workspaceId, to],
  );
  return rows[0];
}
