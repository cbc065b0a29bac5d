import type { Db } from '@switchboard/runtime/sql';

// Retention of deliveries, their attempts and events (docs/webhooks.md#retention): each call is
// one batch in one short statement of its own; SKIP LOCKED leaves rows another transaction holds
// (a claim, an outcome, another replica's batch) to a later batch, so a batch never waits.

/**
 * Deletes up to `limit` of the oldest deliveries created more than `maxAgeMs` ago, with their
 * attempts (ON DELETE CASCADE): finished ones (succeeded, exhausted) and those waiting on a
 * disabled endpoint, never one in flight nor one still retrying on an enabled endpoint.
 */
export async function deleteOldDeliveries(db: Db, maxAgeMs: number, limit: number): Promise<number> {
  const result = await db.raw(
    `WITH doomed AS (
       SELECT d.id FROM deliveries d
       WHERE d.created_at < now() - ? * interval '1 millisecond' AND d.leased_until IS NULL
         AND (d.next_attempt_at IS NULL OR NOT EXISTS (SELECT 1 FROM endpoints e WHERE e.id = d.endpoint_id AND e.enabled))
       ORDER BY d.created_at LIMIT ? FOR UPDATE OF d SKIP LOCKED
     )
     DELETE FROM deliveries d USING doomed WHERE d.id = doomed.id`,
    [maxAgeMs, limit],
  );
  return (result as { rowCount: number }).rowCount;
}

/** Deletes up to `limit` events (their bodies) created more than `maxAgeMs` ago that no delivery references. */
export async function deleteUnreferencedEvents(db: Db, maxAgeMs: number, limit: number): Promise<number> {
  const result = await db.raw(
    `DELETE FROM events WHERE id IN (
       SELECT ev.id FROM events ev
       WHERE ev.created_at < now() - ? * interval '1 millisecond' AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = ev.id)
       ORDER BY ev.created_at LIMIT ? FOR UPDATE SKIP LOCKED
     )`,
    [maxAgeMs, limit],
  );
  return (result as { rowCount: number }).rowCount;
}

/** Drops the response bodies of up to `limit` attempts made more than `maxAgeMs` ago. */
export async function dropOldResponseBodies(db: Db, maxAgeMs: number, limit: number): Promise<number> {
  const result = await db.raw(
    `UPDATE attempts SET response_body = NULL WHERE id IN (
       SELECT id FROM attempts WHERE created_at < now() - ? * interval '1 millisecond' AND response_body IS NOT NULL
       ORDER BY created_at LIMIT ? FOR UPDATE SKIP LOCKED
     )`,
    [maxAgeMs, limit],
  );
  return (result as { rowCount: number }).rowCount;
}
