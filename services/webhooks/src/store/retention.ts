import type { Db } from '@switchboard/runtime/sql';

// Retention of deliveries, their attempts and events (docs/webhooks.md#retention). Each call is
// one batch: one statement, so one short transaction of its own. SKIP LOCKED leaves rows another
// transaction holds (a claim, an outcome, another replica's batch) to a later run, so a batch
// never waits. A batch walks its index onwards from where the last one stopped (`after`): the
// entries of the rows it removed stay in the index until a vacuum, and scanning them again at
// every batch would make each batch slower than the last.

/** Where a walk stands: the (created_at, id) of the last row a batch looked at. */
export interface RetentionMark {
  at: string;
  id: string;
}

export interface RetentionBatchResult {
  /** Rows the batch looked at (fewer than its limit: the walk is over). */
  scanned: number;
  /** Rows deleted, or whose body was dropped. */
  removed: number;
  last: RetentionMark | undefined;
}

export const walkStart: RetentionMark = { at: '-infinity', id: '' };

/** A walk that starts at rows created `maxAgeMs` ago (Postgres's clock). */
export async function walkFrom(db: Db, maxAgeMs: number): Promise<RetentionMark> {
  const { rows } = await db.raw<{ rows: Array<{ at: string }> }>(`SELECT (now() - ? * interval '1 millisecond')::text AS at`, [maxAgeMs]);
  return { at: rows[0].at, id: '' };
}

interface BatchRow {
  scanned: number;
  removed: number;
  last_at: string | null;
  last_id: string | null;
}

/**
 * One batch: `picked` selects and locks (SKIP LOCKED) the next rows of the walk, `changed` deletes
 * or updates those it may and returns their ids; the answer says how many were looked at and
 * changed, and where the walk goes on.
 */
async function batch(db: Db, step: { picked: string; changed: string }, bindings: unknown[]): Promise<RetentionBatchResult> {
  const { rows } = await db.raw<{ rows: BatchRow[] }>(
    `WITH picked AS (${step.picked}), changed AS (${step.changed}), last AS (
       SELECT created_at::text AS at, id FROM picked ORDER BY created_at DESC, id DESC LIMIT 1
     )
     SELECT (SELECT count(*)::int FROM picked) AS scanned, (SELECT count(*)::int FROM changed) AS removed,
            (SELECT at FROM last) AS last_at, (SELECT id FROM last) AS last_id`,
    bindings as never,
  );
  const row = rows[0];
  return { scanned: row.scanned, removed: row.removed, last: row.last_at === null || row.last_id === null ? undefined : { at: row.last_at, id: row.last_id } };
}

/**
 * Deletes the next `limit` deliveries created more than `maxAgeMs` ago, with their attempts (ON
 * DELETE CASCADE): finished ones (succeeded, exhausted) and those waiting on a disabled endpoint,
 * never one in flight nor one still retrying on an enabled endpoint.
 */
export function deleteOldDeliveries(db: Db, maxAgeMs: number, after: RetentionMark, limit: number): Promise<RetentionBatchResult> {
  return batch(
    db,
    {
      picked: `SELECT d.id, d.created_at FROM deliveries d
       WHERE d.created_at < now() - ? * interval '1 millisecond' AND (d.created_at, d.id) > (?::timestamptz, ?)
         AND d.leased_until IS NULL
         AND (d.next_attempt_at IS NULL OR NOT EXISTS (SELECT 1 FROM endpoints e WHERE e.id = d.endpoint_id AND e.enabled))
       ORDER BY d.created_at, d.id LIMIT ? FOR UPDATE OF d SKIP LOCKED`,
      changed: `DELETE FROM deliveries d USING picked WHERE d.id = picked.id RETURNING d.id`,
    },
    [maxAgeMs, after.at, after.id, limit],
  );
}

/**
 * Deletes, of the next `limit` events created more than `maxAgeMs` ago, those no delivery
 * references (their deliveries are gone, or none was ever made: no endpoint subscribed).
 */
export function deleteUnreferencedEvents(db: Db, maxAgeMs: number, after: RetentionMark, limit: number): Promise<RetentionBatchResult> {
  // The reference check is a scalar subquery on purpose: one index probe per event, never a
  // join over the whole deliveries table.
  return batch(
    db,
    {
      picked: `SELECT id, created_at FROM events
       WHERE created_at < now() - ? * interval '1 millisecond' AND (created_at, id) > (?::timestamptz, ?)
       ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED`,
      changed: `DELETE FROM events ev USING picked
       WHERE ev.id = picked.id AND (SELECT 1 FROM deliveries d WHERE d.event_id = ev.id LIMIT 1) IS NULL
       RETURNING ev.id`,
    },
    [maxAgeMs, after.at, after.id, limit],
  );
}

/** Drops the response bodies of the next `limit` attempts made more than `maxAgeMs` ago. */
export function dropOldResponseBodies(db: Db, maxAgeMs: number, after: RetentionMark, limit: number): Promise<RetentionBatchResult> {
  return batch(
    db,
    {
      picked: `SELECT id, created_at FROM attempts
       WHERE created_at < now() - ? * interval '1 millisecond' AND response_body IS NOT NULL AND (created_at, id) > (?::timestamptz, ?)
       ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED`,
      changed: `UPDATE attempts a SET response_body = NULL FROM picked WHERE a.id = picked.id RETURNING a.id`,
    },
    [maxAgeMs, after.at, after.id, limit],
  );
}
