import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// Reservations of the data plane against a key's cap (docs/api/keys.md#reservations): open until settled by the usage
// they were for, or until they expire.

/**
 * Reserves `amountUsd` for `keyId` if the month's spend, the open reservations and this amount
 * stay at or under the cap. Two statements under the key's row lock: the lock serializes
 * reservations of one key, and the second statement, started after the lock was granted, sees
 * every reservation committed before (under READ COMMITTED one statement that waited for a lock
 * would still read the older snapshot). Returns undefined when the key is gone, revoked or the
 * cap does not allow it, with the facts of the refusal.
 */
export async function reserveWithinCap(
  trx: Knex.Transaction,
  input: { id: string; keyId: string; month: string; amountUsd: string; ttlSeconds: number },
): Promise<{ reserved: true } | { reserved: false; capUsd: string | null; committedUsd: string; status?: string }> {
  const key = (await trx('api_keys').where({ id: input.keyId }).forUpdate().first('status', trx.raw('monthly_spend_cap_usd::text AS cap'))) as
    | { status: string; cap: string | null }
    | undefined;
  if (key?.status !== 'active') return { reserved: false, capUsd: null, committedUsd: '0', status: key?.status ?? 'unknown' };
  const { rows } = await trx.raw<{ rows: Array<{ committed: string; inserted: string | null }> }>(
    `WITH committed AS (
       SELECT COALESCE((SELECT spend_usd FROM key_monthly_spend WHERE key_id = ? AND month = ?::date), 0)
            + COALESCE((SELECT sum(amount_usd) FROM reservations
                         WHERE key_id = ? AND settled_at IS NULL AND expires_at > now() AND created_at >= (?::date)::timestamp AT TIME ZONE 'UTC'), 0) AS amount
     ), inserted AS (
       INSERT INTO reservations (id, key_id, amount_usd, expires_at)
       SELECT ?, ?, ?::numeric, now() + make_interval(secs => ?) FROM committed
        WHERE ?::numeric IS NULL OR committed.amount + ?::numeric <= ?::numeric
       RETURNING id
     )
     SELECT committed.amount::text AS committed, (SELECT id FROM inserted) AS inserted FROM committed`,
    [input.keyId, input.month, input.keyId, input.month, input.id, input.keyId, input.amountUsd, input.ttlSeconds, key.cap, input.amountUsd, key.cap],
  );
  const row = rows[0];
  return row.inserted ? { reserved: true } : { reserved: false, capUsd: key.cap, committedUsd: row.committed };
}

/** Settles a reservation of `keyId` (its usage was recorded); false when there was none open. */
export async function settleReservation(trx: Knex.Transaction, reservationId: string, keyId: string): Promise<boolean> {
  const updated = await trx('reservations').where({ id: reservationId, key_id: keyId }).whereNull('settled_at').update({ settled_at: trx.fn.now() });
  return updated === 1;
}

/** Ends an open reservation without usage (its request produced nothing); false when none was open. */
export async function releaseReservation(db: Db, reservationId: string): Promise<boolean> {
  const updated = await db('reservations').where({ id: reservationId }).whereNull('settled_at').update({ settled_at: db.fn.now() });
  return updated === 1;
}

/** Deletes reservations settled or expired more than a day ago (they no longer count). */
export async function pruneReservations(db: Db): Promise<number> {
  return db('reservations')
    .where((q) => q.whereNotNull('settled_at').orWhere('expires_at', '<', db.raw(`now() - interval '1 day'`)))
    .andWhere('created_at', '<', db.raw(`now() - interval '1 day'`))
    .delete();
}
