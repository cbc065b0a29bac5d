import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// Reservations of the data plane against a key's cap (docs/api/keys.md#reservations): open until settled by the usage
// they were for, or until they expire.

/** Opens a reservation of `amountUsd` for `keyId` (decided under the key's row lock: authorization.ts). */
export async function insertReservation(trx: Knex.Transaction, input: { id: string; keyId: string; amountUsd: string; ttlSeconds: number }): Promise<void> {
  await trx.raw(`INSERT INTO reservations (id, key_id, amount_usd, expires_at) VALUES (?, ?, ?::numeric, now() + make_interval(secs => ?))`, [
    input.id,
    input.keyId,
    input.amountUsd,
    input.ttlSeconds,
  ]);
}

/** Settles the open reservations named (their usage was recorded), each of the key given with it. */
export async function settleReservations(trx: Knex.Transaction, settled: Array<{ reservationId: string; keyId: string }>): Promise<void> {
  if (settled.length === 0) return;
  await trx.raw(
    `UPDATE reservations r SET settled_at = now() FROM unnest(?::text[], ?::text[]) AS u (id, key_id)
      WHERE r.id = u.id AND r.key_id = u.key_id AND r.settled_at IS NULL`,
    [settled.map((s) => s.reservationId), settled.map((s) => s.keyId)],
  );
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
