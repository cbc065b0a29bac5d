import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// PublishEvent's idempotency keys, per workspace.

/**
 * Claims `key` for `eventId`; when the key was used before, the event it named. A concurrent
 * publish with the same key waits on the row until the first commits (then gets its event) or
 * rolls back (then claims the key itself).
 */
export async function claimIdempotencyKey(trx: Knex.Transaction, workspaceId: string, key: string, eventId: string): Promise<string | undefined> {
  const inserted = await trx.raw<{ rows: unknown[] }>(
    'INSERT INTO published_events (workspace_id, idempotency_key, event_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING event_id',
    [workspaceId, key, eventId],
  );
  if (inserted.rows.length === 1) return undefined;
  const { rows } = await trx.raw<{ rows: Array<{ event_id: string }> }>(
    'SELECT event_id FROM published_events WHERE workspace_id = ? AND idempotency_key = ?',
    [workspaceId, key],
  );
  return rows[0]?.event_id;
}

/** Forgets keys older than `maxAgeMs` (a retry comes within minutes, not days). */
export async function pruneIdempotencyKeys(db: Db, maxAgeMs: number): Promise<number> {
  const result = await db.raw(`DELETE FROM published_events WHERE created_at < now() - ? * interval '1 millisecond'`, [maxAgeMs]);
  return (result as { rowCount: number }).rowCount;
}
