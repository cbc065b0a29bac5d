import type { Knex } from '@switchboard/runtime/db';
import { type Db, inKeyOrder } from '@switchboard/runtime/sql';

// PublishEvent's idempotency keys, per workspace.

/**
 * Claims each `key` for its `eventId`; returns, for the keys used before, the event they named
 * (by position in `claims`). A concurrent publish with the same key waits on the row until the
 * first commits (then gets its event) or rolls back (then claims the key itself). The keys are
 * inserted in one order (workspace, key), so two batches of replicas cannot deadlock on them.
 */
export async function claimIdempotencyKeys(
  trx: Knex.Transaction,
  claims: Array<{ workspaceId: string; key: string; eventId: string }>,
): Promise<Map<number, string>> {
  const earlier = new Map<number, string>();
  if (claims.length === 0) return earlier;
  const order = inKeyOrder(
    claims.map((_, i) => i),
    (i) => `${claims[i].workspaceId}\n${claims[i].key}`,
  );
  const { rows } = await trx.raw<{ rows: Array<{ workspace_id: string; idempotency_key: string }> }>(
    `INSERT INTO published_events (workspace_id, idempotency_key, event_id)
     SELECT workspace_id, idempotency_key, event_id FROM unnest(?::text[], ?::text[], ?::text[]) WITH ORDINALITY AS t(workspace_id, idempotency_key, event_id, n) ORDER BY n
     ON CONFLICT DO NOTHING RETURNING workspace_id, idempotency_key`,
    [order.map((i) => claims[i].workspaceId), order.map((i) => claims[i].key), order.map((i) => claims[i].eventId)],
  );
  const claimed = new Set(rows.map((row) => `${row.workspace_id}\n${row.idempotency_key}`));
  const lost = order.filter((i) => !claimed.has(`${claims[i].workspaceId}\n${claims[i].key}`));
  if (lost.length === 0) return earlier;
  const { rows: found } = await trx.raw<{ rows: Array<{ workspace_id: string; idempotency_key: string; event_id: string }> }>(
    `SELECT p.workspace_id, p.idempotency_key, p.event_id FROM published_events p
     JOIN unnest(?::text[], ?::text[]) AS t(workspace_id, idempotency_key) USING (workspace_id, idempotency_key)`,
    [lost.map((i) => claims[i].workspaceId), lost.map((i) => claims[i].key)],
  );
  const eventOf = new Map(found.map((row) => [`${row.workspace_id}\n${row.idempotency_key}`, row.event_id]));
  for (const i of lost) {
    const eventId = eventOf.get(`${claims[i].workspaceId}\n${claims[i].key}`);
    if (eventId) earlier.set(i, eventId);
  }
  return earlier;
}

/** Forgets keys older than `maxAgeMs` (a retry comes within minutes, not days). */
export async function pruneIdempotencyKeys(db: Db, maxAgeMs: number): Promise<number> {
  const result = await db.raw(`DELETE FROM published_events WHERE created_at < now() - ? * interval '1 millisecond'`, [maxAgeMs]);
  return (result as { rowCount: number }).rowCount;
}
