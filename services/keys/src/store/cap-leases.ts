import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// Budget leases (docs/money-path.md#leases): on a key's budget (cap_leases, migrations/005, keyed
// by the budget id) or on a workspace's (workspace_leases, migrations/007). Decided in
// cap-leases.ts under the budget's lock, settled by usage (spend.ts). Every time is the caller's
// clock, so tests can move it across a period's end.

export type LeaseKind = 'key' | 'workspace';

const tables = {
  key: { table: 'cap_leases', subject: 'key_id' },
  workspace: { table: 'workspace_leases', subject: 'workspace_id' },
} as const;

/** Workspace lease ids: a release names only the lease, and the prefix tells the table. */
export const workspaceLeasePrefix = 'wsl';

export interface LeaseRow {
  id: string;
  granted_usd: string;
  settled_usd: string;
}

/** What a key's budget decision needs of the key, read under its budget's lock (lockKeyBudget). */
export interface KeyBudgetRow {
  status: 'active' | 'revoked';
  expires_at: Date | null;
  budget_id: string;
  workspace_id: string;
  cap: string | null;
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  max_concurrent: number | null;
}

/**
 * Locks the budget of `keyId` (the row of its budget id: every key of one budget waits on it) and
 * reads the key after the lock, so a decision sees every earlier decision of the budget committed.
 * Undefined when there is no such key. Every budget decision of a key (cap and rate leases,
 * AuthorizeKey reservations) takes this lock. NO KEY UPDATE, not UPDATE: it serializes the
 * decisions (and any change of the key's row) without blocking the foreign-key checks of a usage
 * batch (spend, alerts), which would otherwise deadlock with a renewal waiting on a lease row the
 * batch is settling.
 */
export async function lockKeyBudget(trx: Knex.Transaction, keyId: string): Promise<KeyBudgetRow | undefined> {
  const locked = await trx.raw<{ rows: unknown[] }>(
    `SELECT 1 FROM api_keys WHERE id = (SELECT COALESCE(budget_id, id) FROM api_keys WHERE id = ?) FOR NO KEY UPDATE`,
    [keyId],
  );
  if (locked.rows.length === 0) return undefined;
  const { rows } = await trx.raw<{ rows: KeyBudgetRow[] }>(
    `SELECT status, expires_at, COALESCE(budget_id, id) AS budget_id, workspace_id, monthly_spend_cap_usd::text AS cap,
            requests_per_minute, tokens_per_minute, max_concurrent
       FROM api_keys WHERE id = ?`,
    [keyId],
  );
  return rows[0];
}

/** Serializes the budget decisions of a workspace (it has no row here to lock). */
export async function lockWorkspaceBudget(trx: Knex.Transaction, workspaceId: string): Promise<void> {
  await trx.raw(`SELECT pg_advisory_xact_lock(hashtext('keys.workspace_budget:' || ?))`, [workspaceId]);
}

/** The lease `leaseId` of the subject, if it still holds at `now`. */
export async function findLiveLease(trx: Knex.Transaction, kind: LeaseKind, leaseId: string, subjectId: string, now: Date): Promise<LeaseRow | undefined> {
  const { table, subject } = tables[kind];
  const { rows } = await trx.raw<{ rows: LeaseRow[] }>(
    `SELECT id, granted_usd::text, settled_usd::text FROM ${table} WHERE id = ? AND ${subject} = ? AND expires_at > ?`,
    [leaseId, subjectId, now],
  );
  return rows[0];
}

/** What the other leases of a subject hold at `now`: their unsettled parts, and how many still hold some. */
export async function otherLeases(
  trx: Knex.Transaction,
  kind: LeaseKind,
  subjectId: string,
  exceptLeaseId: string,
  now: Date,
): Promise<{ leased: string; leases: number }> {
  const { table, subject } = tables[kind];
  const { rows } = await trx.raw<{ rows: Array<{ leased: string; leases: string }> }>(
    `SELECT COALESCE(sum(GREATEST(granted_usd - settled_usd, 0)), 0)::text AS leased, count(*) FILTER (WHERE granted_usd > settled_usd) AS leases
       FROM ${table} WHERE ${subject} = ? AND expires_at > ? AND id <> ?`,
    [subjectId, now, exceptLeaseId],
  );
  return { leased: rows[0].leased, leases: Number(rows[0].leases) };
}

/** A new lease, holding its grant until `holdsUntil`; `month` is the month of a key's lease (cap_leases keeps it). */
export async function insertLease(
  trx: Knex.Transaction,
  kind: LeaseKind,
  lease: { id: string; subjectId: string; month: string; holder: string; grantedUsd: string; holdsUntil: Date },
): Promise<void> {
  const { table, subject } = tables[kind];
  await trx(table).insert({
    id: lease.id,
    [subject]: lease.subjectId,
    ...(kind === 'key' ? { month: lease.month } : {}),
    holder: lease.holder,
    granted_usd: lease.grantedUsd,
    expires_at: lease.holdsUntil,
  });
}

export async function renewLease(
  trx: Knex.Transaction,
  kind: LeaseKind,
  lease: { id: string; month: string; holder: string; grantedUsd: string; holdsUntil: Date },
): Promise<void> {
  const { table } = tables[kind];
  await trx(table)
    .where({ id: lease.id })
    .update({
      ...(kind === 'key' ? { month: lease.month } : {}),
      holder: lease.holder,
      granted_usd: lease.grantedUsd,
      expires_at: lease.holdsUntil,
      updated_at: trx.fn.now(),
    });
}

/**
 * Gives back what a lease still holding did not use: it keeps `usedUsd` (in flight until settled)
 * or what is settled already if more, and never more than it was granted. Only lowers what the
 * lease holds, so it needs no lock. False when there was no such lease.
 */
export async function releaseLease(db: Db, leaseId: string, usedUsd: string, now: Date): Promise<boolean> {
  const { table } = tables[leaseId.startsWith(`${workspaceLeasePrefix}_`) ? 'workspace' : 'key'];
  const updated = await db.raw<{ rowCount: number }>(
    `UPDATE ${table} SET granted_usd = LEAST(granted_usd, GREATEST(?::numeric, settled_usd)), updated_at = now() WHERE id = ? AND expires_at > ?`,
    [usedUsd, leaseId, now],
  );
  return updated.rowCount === 1;
}

/** Adds settled usage to leases, one statement per kind for a batch: `costs` holds one total per lease and subject. */
export async function settleLeases(
  trx: Knex.Transaction,
  kind: LeaseKind,
  costs: Array<{ leaseId: string; subjectId: string; costUsd: string }>,
): Promise<void> {
  if (costs.length === 0) return;
  const { table, subject } = tables[kind];
  // Locked in id order first: two batches settling the same leases never wait on each other crosswise.
  await trx.raw(`SELECT 1 FROM ${table} WHERE id = ANY(?::text[]) ORDER BY id FOR UPDATE`, [costs.map((c) => c.leaseId)]);
  await trx.raw(
    `UPDATE ${table} l SET settled_usd = l.settled_usd + c.cost, updated_at = now()
       FROM unnest(?::text[], ?::text[], ?::numeric[]) AS c (id, subject, cost)
      WHERE l.id = c.id AND l.${subject} = c.subject`,
    [costs.map((c) => c.leaseId), costs.map((c) => c.subjectId), costs.map((c) => c.costUsd)],
  );
}

/** Deletes budget and rate leases expired more than a day ago (usage still in flight has settled by then). */
export async function pruneLeases(db: Db): Promise<number> {
  let pruned = 0;
  for (const table of ['cap_leases', 'workspace_leases', 'rate_leases']) {
    pruned += await db(table).where('expires_at', '<', db.raw(`now() - interval '1 day'`)).delete();
  }
  return pruned;
}
