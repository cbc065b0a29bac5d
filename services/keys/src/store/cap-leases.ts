import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// Leases on a key's monthly cap (migrations/005_cap_leases.ts); decided in cap-leases.ts under the
// key's row lock, settled by usage (spend.ts).

export interface CapLeaseRow {
  id: string;
  granted_usd: string;
  settled_usd: string;
}

/** The lease `leaseId` of `keyId` for `month`, if it has not expired. */
export async function findLiveLease(trx: Knex.Transaction, leaseId: string, keyId: string, month: string): Promise<CapLeaseRow | undefined> {
  const { rows } = await trx.raw<{ rows: CapLeaseRow[] }>(
    `SELECT id, granted_usd::text, settled_usd::text FROM cap_leases WHERE id = ? AND key_id = ? AND month = ?::date AND expires_at > now()`,
    [leaseId, keyId, month],
  );
  return rows[0];
}

/** Expires `ttlSeconds` from now, and with its month at the latest (a month's lease counts against that month's cap only). */
const expiresAtSql = `LEAST(now() + make_interval(secs => ?), (?::date + interval '1 month')::timestamp AT TIME ZONE 'UTC')`;

export async function insertLease(
  trx: Knex.Transaction,
  lease: { id: string; keyId: string; month: string; holder: string; grantedUsd: string; ttlSeconds: number },
): Promise<Date> {
  const { rows } = await trx.raw<{ rows: Array<{ expires_at: Date }> }>(
    `INSERT INTO cap_leases (id, key_id, month, holder, granted_usd, expires_at) VALUES (?, ?, ?::date, ?, ?::numeric, ${expiresAtSql}) RETURNING expires_at`,
    [lease.id, lease.keyId, lease.month, lease.holder, lease.grantedUsd, lease.ttlSeconds, lease.month],
  );
  return rows[0].expires_at;
}

export async function renewLease(
  trx: Knex.Transaction,
  lease: { id: string; month: string; holder: string; grantedUsd: string; ttlSeconds: number },
): Promise<Date> {
  const { rows } = await trx.raw<{ rows: Array<{ expires_at: Date }> }>(
    `UPDATE cap_leases SET holder = ?, granted_usd = ?::numeric, expires_at = ${expiresAtSql}, updated_at = now() WHERE id = ? RETURNING expires_at`,
    [lease.holder, lease.grantedUsd, lease.ttlSeconds, lease.month, lease.id],
  );
  return rows[0].expires_at;
}

/**
 * Gives back what an unexpired lease did not use: it keeps `usedUsd` (in flight until settled) or
 * what is settled already if more, and never more than it was granted. Only lowers what the lease
 * holds, so it needs no lock of the key. False when there was no such lease.
 */
export async function releaseLease(db: Db, leaseId: string, usedUsd: string): Promise<boolean> {
  const updated = await db.raw<{ rowCount: number }>(
    `UPDATE cap_leases SET granted_usd = LEAST(granted_usd, GREATEST(?::numeric, settled_usd)), updated_at = now() WHERE id = ? AND expires_at > now()`,
    [usedUsd, leaseId],
  );
  return updated.rowCount === 1;
}

/** Adds settled usage to leases, one statement for a batch: `costs` holds one total per lease of a key. */
export async function settleLeases(trx: Knex.Transaction, costs: Array<{ leaseId: string; keyId: string; costUsd: string }>): Promise<void> {
  if (costs.length === 0) return;
  await trx.raw(
    `UPDATE cap_leases l SET settled_usd = l.settled_usd + c.cost, updated_at = now()
       FROM unnest(?::text[], ?::text[], ?::numeric[]) AS c (id, key_id, cost)
      WHERE l.id = c.id AND l.key_id = c.key_id`,
    [costs.map((c) => c.leaseId), costs.map((c) => c.keyId), costs.map((c) => c.costUsd)],
  );
}

/** Deletes leases expired more than a day ago (usage still in flight has settled by then). */
export async function pruneLeases(db: Db): Promise<number> {
  return db('cap_leases').where('expires_at', '<', db.raw(`now() - interval '1 day'`)).delete();
}
