import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';
import type { AuditEventRow } from './audit-events.js';

// Data exports (src/data-exports.ts) and what an export reads of the identity schema. Every read
// names its columns: never a password hash, a token hash, a TOTP secret or a recovery code.

export interface DataExportRow {
  id: string;
  user_id: string;
  status: 'pending' | 'ready' | 'failed' | 'expired';
  attempts: number;
  created_at: Date;
  ready_at: Date | null;
  expires_at: Date | null;
}

const exportColumns = 'id, user_id, status, attempts, created_at, ready_at, expires_at';

/** A new pending export of the user, or undefined when one is pending already (the partial unique index). */
export async function insertPendingExport(trx: Knex.Transaction, row: { id: string; userId: string; now: Date }): Promise<DataExportRow | undefined> {
  const { rows } = await trx.raw<{ rows: DataExportRow[] }>(
    `INSERT INTO data_exports (id, user_id, status, next_attempt_at, created_at) VALUES (?, ?, 'pending', ?, ?)
     ON CONFLICT (user_id) WHERE status = 'pending' DO NOTHING RETURNING ${exportColumns}`,
    [row.id, row.userId, row.now, row.now],
  );
  return rows[0];
}

export async function findPendingExport(db: Db, userId: string): Promise<DataExportRow | undefined> {
  const { rows } = await db.raw<{ rows: DataExportRow[] }>(`SELECT ${exportColumns} FROM data_exports WHERE user_id = ? AND status = 'pending'`, [userId]);
  return rows[0];
}

/** The user's export `id` with its (encrypted) document; undefined for another user's or an unknown id. */
export async function findUserExport(db: Db, userId: string, id: string): Promise<(DataExportRow & { document_encrypted: string | null }) | undefined> {
  const { rows } = await db.raw<{ rows: Array<DataExportRow & { document_encrypted: string | null }> }>(
    `SELECT ${exportColumns}, document_encrypted FROM data_exports WHERE id = ? AND user_id = ?`,
    [id, userId],
  );
  return rows[0];
}

/**
 * Claims the pending export due first (FOR UPDATE SKIP LOCKED: replicas never claim the same one):
 * counts the attempt and moves `next_attempt_at` past the lease, so a build whose process died is
 * picked up again once the lease is over.
 */
export async function claimDueExport(db: Db, now: Date, leaseUntil: Date): Promise<DataExportRow | undefined> {
  const { rows } = await db.raw<{ rows: DataExportRow[] }>(
    `UPDATE data_exports SET attempts = attempts + 1, next_attempt_at = ?
      WHERE id = (SELECT id FROM data_exports WHERE status = 'pending' AND next_attempt_at <= ?
                   ORDER BY next_attempt_at LIMIT 1 FOR UPDATE SKIP LOCKED)
      RETURNING ${exportColumns}`,
    [leaseUntil, now],
  );
  return rows[0];
}

/** Stores the built document; false when the export is no longer pending (an erased account). */
export async function completeExport(db: Db, id: string, document: { encrypted: string; bytes: number; readyAt: Date; expiresAt: Date }): Promise<boolean> {
  const updated = await db('data_exports').where({ id, status: 'pending' }).update({
    status: 'ready',
    document_encrypted: document.encrypted,
    document_bytes: document.bytes,
    ready_at: document.readyAt,
    expires_at: document.expiresAt,
    last_error: null,
  });
  return updated === 1;
}

/** A failed attempt: tried again at `retryAt`, or `failed` for good when `retryAt` is undefined. */
export async function failExportAttempt(db: Db, id: string, error: string, retryAt: Date | undefined): Promise<void> {
  await db('data_exports')
    .where({ id, status: 'pending' })
    .update(retryAt ? { next_attempt_at: retryAt, last_error: error } : { status: 'failed', last_error: error });
}

/** Deletes the documents of exports past their expiry (the rows stay: their links answer 410); how many. */
export async function expireExports(db: Db, now: Date): Promise<number> {
  return db('data_exports').where('status', 'ready').andWhere('expires_at', '<=', now).update({ status: 'expired', document_encrypted: null });
}

// ---- What an export reads about the user -------------------------------------------------

export async function accountToExport(db: Db, userId: string) {
  return db('users')
    .first(
      'id',
      'email',
      'email_verified_at',
      'full_name',
      'two_factor_enabled',
      'personal_workspace_id',
      'password_changed_at',
      'created_at',
      'updated_at',
      'deactivated_at',
    )
    .where({ id: userId }) as Promise<
    | {
        id: string;
        email: string;
        email_verified_at: Date | null;
        full_name: string | null;
        two_factor_enabled: boolean;
        personal_workspace_id: string;
        password_changed_at: Date;
        created_at: Date;
        updated_at: Date;
        deactivated_at: Date | null;
      }
    | undefined
  >;
}

/** The user's sessions, newest first; `limit + 1` rows. No refresh token or its hash. */
export async function sessionsToExport(db: Db, userId: string, limit: number) {
  return db('sessions')
    .select('id', 'aal', 'created_at', 'last_used_at', 'expires_at', 'revoked_at', 'revoked_reason', 'ip', 'user_agent')
    .where({ user_id: userId })
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(limit + 1) as Promise<
    Array<{
      id: string;
      aal: string;
      created_at: Date;
      last_used_at: Date;
      expires_at: Date;
      revoked_at: Date | null;
      revoked_reason: string | null;
      ip: string | null;
      user_agent: string | null;
    }>
  >;
}

export async function membershipsToExport(db: Db, userId: string) {
  return db('memberships as m')
    .join('organizations as o', 'o.id', 'm.org_id')
    .select('m.org_id', 'o.name', 'o.personal', 'm.role', 'm.created_at')
    .where('m.user_id', userId)
    .orderBy('m.created_at') as Promise<Array<{ org_id: string; name: string; personal: boolean; role: string; created_at: Date }>>;
}

export interface ExportedInvitationRow {
  id: string;
  org_id: string;
  org_name: string;
  email: string;
  role: string;
  invited_by: string;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
  accepted_by: string | null;
  revoked_at: Date | null;
}

/**
 * The invitations sent to the user's address (once they proved it is theirs: anyone may sign up
 * with an address), accepted by them, and those they sent, newest first; `limit + 1` rows. No
 * token hash. `sent` rows show the invitee's address: the user wrote it.
 */
export async function invitationsToExport(
  db: Db,
  user: { id: string; email: string; email_verified_at: Date | null },
  limit: number,
): Promise<ExportedInvitationRow[]> {
  const { rows } = await db.raw<{ rows: ExportedInvitationRow[] }>(
    `SELECT i.id, i.org_id, o.name AS org_name, i.email, i.role, i.invited_by, i.created_at, i.expires_at, i.accepted_at, i.accepted_by, i.revoked_at
       FROM invitations i JOIN organizations o ON o.id = i.org_id
      WHERE (i.email = ? AND ?) OR i.accepted_by = ? OR i.invited_by = ?
      ORDER BY i.created_at DESC, i.id DESC LIMIT ?`,
    [user.email, user.email_verified_at !== null, user.id, user.id, limit + 1],
  );
  return rows;
}

/** An audit record as the export holds it (who the record is about, and by whom it was written, left out). */
export type ExportedAuditRow = Omit<AuditEventRow, 'subject_user_id' | 'producer'>;

/** The audit records about the user (its subject or its actor), newest first; `limit + 1` rows. Table of migration 008. */
export async function auditEventsToExport(db: Db, userId: string, limit: number): Promise<ExportedAuditRow[]> {
  const { rows } = await db.raw<{ rows: ExportedAuditRow[] }>(
    `SELECT id, workspace_id, action, actor_type, actor_id, actor_ip, target_type, target_id, outcome, metadata, request_id, created_at
       FROM audit_events WHERE subject_user_id = ? OR actor_id = ?
      ORDER BY created_at DESC, id DESC LIMIT ?`,
    [userId, userId, limit + 1],
  );
  return rows;
}
