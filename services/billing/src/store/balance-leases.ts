import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// Leases on workspace balances. What a lease holds of the balance is its outstanding part:
// granted - settled while unexpired, nothing once expired.

const outstanding = 'CASE WHEN expires_at > now() THEN GREATEST(granted_usd - settled_usd, 0) ELSE 0 END';

export interface LiveLease {
  id: string;
  granted_usd: string;
  settled_usd: string;
}

/** The lease `id` of `workspaceId` if it has not expired. */
export async function findLiveLease(trx: Knex.Transaction, id: string, workspaceId: string): Promise<LiveLease | undefined> {
  const { rows } = await trx.raw<{ rows: LiveLease[] }>(
    'SELECT id, granted_usd::text, settled_usd::text FROM balance_leases WHERE id = ? AND workspace_id = ? AND expires_at > now()',
    [id, workspaceId],
  );
  return rows[0];
}

/** What the workspace's leases other than `exceptId` hold, and how many of them hold anything. */
export async function otherLeases(trx: Knex.Transaction, workspaceId: string, exceptId: string): Promise<{ outstandingUsd: string; holding: number }> {
  const { rows } = await trx.raw<{ rows: Array<{ outstanding_usd: string; holding: number }> }>(
    `SELECT COALESCE(sum(${outstanding}), 0)::text AS outstanding_usd, count(*) FILTER (WHERE granted_usd > settled_usd)::int AS holding
       FROM balance_leases WHERE workspace_id = ? AND expires_at > now() AND id <> ?`,
    [workspaceId, exceptId],
  );
  return { outstandingUsd: rows[0].outstanding_usd, holding: rows[0].holding };
}

export interface LeaseGrant {
  id: string;
  workspaceId: string;
  holder: string;
  grantedUsd: string;
  ttlMs: number;
}

/** Creates or renews the lease with its new grant and a fresh expiry; returns the expiry. */
export async function upsertLease(trx: Knex.Transaction, grant: LeaseGrant): Promise<Date> {
  const { rows } = await trx.raw<{ rows: Array<{ expires_at: Date }> }>(
    `INSERT INTO balance_leases (id, workspace_id, holder, granted_usd, expires_at)
     VALUES (?, ?, ?, ?::numeric, now() + ? * interval '1 millisecond')
     ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, granted_usd = excluded.granted_usd, expires_at = excluded.expires_at, updated_at = now()
     RETURNING expires_at`,
    [grant.id, grant.workspaceId, grant.holder, grant.grantedUsd, grant.ttlMs],
  );
  return rows[0].expires_at;
}

/**
 * Gives back what an unexpired lease did not use: its grant shrinks to what was used, never below
 * what was settled (the in-flight part stays held until settled), never above what was granted.
 */
export async function releaseLease(db: Db, id: string, usedUsd: string): Promise<void> {
  await db.raw(
    `UPDATE balance_leases SET granted_usd = LEAST(granted_usd, GREATEST(?::numeric, settled_usd)), updated_at = now()
      WHERE id = ? AND expires_at > now()`,
    [usedUsd, id],
  );
}

/** Moves settled usage into its leases (`settled_usd += amount`): one amount per lease, of its workspace only. */
export async function settleLeases(trx: Knex.Transaction, settled: Array<{ leaseId: string; workspaceId: string; amountUsd: string }>): Promise<void> {
  if (settled.length === 0) return;
  await trx.raw(
    `UPDATE balance_leases l SET settled_usd = l.settled_usd + s.amount, updated_at = now()
       FROM unnest(?::text[], ?::text[], ?::numeric[]) AS s(id, workspace_id, amount) WHERE l.id = s.id AND l.workspace_id = s.workspace_id`,
    [settled.map((lease) => lease.leaseId), settled.map((lease) => lease.workspaceId), settled.map((lease) => lease.amountUsd)],
  );
}

/** Deletes leases expired more than a day ago (settlements after that find no row and change nothing). */
export async function pruneLeases(db: Db): Promise<number> {
  return db('balance_leases').where('expires_at', '<', db.raw(`now() - interval '1 day'`)).delete();
}
