import type { Knex } from '@switchboard/runtime/db';
import { type Db, microsOf, type PageQuery, pageClause } from '@switchboard/runtime/sql';

// The audit log's rows (migration 008). Inserts and reads run as switchboard_audit_writer (the
// audit pool, or SET LOCAL ROLE in the consumer's transaction); only the retention sweeper deletes,
// as the owner, and the table's trigger lets it delete rows older than 365 days only.

export interface AuditEventRow {
  id: string;
  workspace_id: string;
  action: string;
  actor_type: string;
  actor_id: string;
  actor_ip: string | null;
  target_type: string | null;
  target_id: string | null;
  outcome: string;
  metadata: Record<string, unknown>;
  request_id: string | null;
  subject_user_id: string | null;
  producer: string;
  created_at: Date;
}

export type NewAuditEventRow = Omit<AuditEventRow, 'created_at'> & { created_at: Date | string };

/** Inserts records; one already there (the same event delivered again) is left as it is. */
export async function insertAuditEvents(db: Db, rows: NewAuditEventRow[]): Promise<number> {
  if (rows.length === 0) return 0;
  const inserted = await db('audit_events')
    .insert(rows.map((row) => ({ ...row, metadata: JSON.stringify(row.metadata) })))
    .onConflict('id')
    .ignore()
    .returning('id');
  return inserted.length;
}

export interface AuditEventFilter {
  workspaceId: string;
  action?: string;
  actorId?: string;
  since?: Date;
  until?: Date;
}

/** A workspace's records newest first, a page (`limit + 1` rows) after `page.after`. */
export async function listAuditEvents(db: Db, filter: AuditEventFilter, page: PageQuery): Promise<Array<AuditEventRow & { cursor_micros: string }>> {
  const conditions = ['workspace_id = ?'];
  const leading: Knex.RawBinding[] = [filter.workspaceId];
  if (filter.action) {
    conditions.push('action = ?');
    leading.push(filter.action);
  }
  if (filter.actorId) {
    conditions.push('actor_id = ?');
    leading.push(filter.actorId);
  }
  if (filter.since) {
    conditions.push('created_at >= ?');
    leading.push(filter.since);
  }
  if (filter.until) {
    conditions.push('created_at < ?');
    leading.push(filter.until);
  }
  const { cursor, bindings } = pageClause(page, 'created_at', 'id', leading);
  const result = await db.raw<{ rows: Array<AuditEventRow & { cursor_micros: string }> }>(
    `SELECT *, ${microsOf('created_at')} AS cursor_micros
       FROM audit_events
      WHERE ${conditions.join(' AND ')} ${cursor}
      ORDER BY created_at DESC, id DESC LIMIT ?`,
    bindings,
  );
  return result.rows;
}

/** Every record about a user (they acted, or were acted upon), newest first: the data export's. */
export async function listAuditEventsAboutUser(db: Db, userId: string): Promise<AuditEventRow[]> {
  return db('audit_events')
    .where((about) => about.where({ subject_user_id: userId }).orWhere({ actor_id: userId }))
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ]);
}

/** Deletes up to `batch` records older than `before` (the owner's pool); returns how many. */
export async function deleteAuditEventsBefore(db: Db, before: Date, batch: number): Promise<number> {
  const result = await db.raw<{ rowCount: number }>(
    'DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE created_at < ? ORDER BY created_at LIMIT ?)',
    [before, batch],
  );
  return result.rowCount;
}
