import { type Db, microsOf, type PageQuery, pageClause } from '@switchboard/runtime/sql';

// Organization invitations (token stored hashed).

export interface InvitationRow {
  id: string;
  org_id: string;
  email: string;
  role: string;
  invited_by: string;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
  revoked_at: Date | null;
  /** pending, accepted, expired or revoked, computed by the database clock. */
  status: string;
  cursor_micros: string;
}

const invitationSelect = `SELECT id, org_id, email, role, invited_by, created_at, expires_at, accepted_at, revoked_at,
            CASE WHEN accepted_at IS NOT NULL THEN 'accepted'
                 WHEN revoked_at IS NOT NULL THEN 'revoked'
                 WHEN expires_at <= now() THEN 'expired'
                 ELSE 'pending' END AS status,
            ${microsOf('created_at')} AS cursor_micros
       FROM invitations`;

export async function insertInvitation(
  db: Db,
  invitation: { id: string; orgId: string; email: string; role: string; tokenHash: string; invitedBy: string; ttlMs: number },
): Promise<InvitationRow> {
  await db.raw(
    `INSERT INTO invitations (id, org_id, email, role, token_hash, invited_by, expires_at)
     VALUES (?, ?, ?, ?, ?, ?, now() + ?::bigint * interval '1 millisecond')`,
    [invitation.id, invitation.orgId, invitation.email, invitation.role, invitation.tokenHash, invitation.invitedBy, invitation.ttlMs],
  );
  return (await findInvitation(db, invitation.orgId, invitation.id))!;
}

export async function findInvitation(db: Db, orgId: string, invitationId: string): Promise<InvitationRow | undefined> {
  const result = await db.raw<{ rows: InvitationRow[] }>(`${invitationSelect} WHERE org_id = ? AND id = ?`, [orgId, invitationId]);
  return result.rows[0];
}

/** The invitation of a token hash; with `lock`, locked for the transaction (one acceptance at a time). */
export async function findInvitationByTokenHash(db: Db, tokenHash: string, lock = false): Promise<InvitationRow | undefined> {
  const result = await db.raw<{ rows: InvitationRow[] }>(`${invitationSelect} WHERE token_hash = ?${lock ? ' FOR UPDATE' : ''}`, [tokenHash]);
  return result.rows[0];
}

/** Invitations of the organization, newest first; `limit + 1` rows. */
export async function listInvitations(db: Db, orgId: string, page: PageQuery): Promise<InvitationRow[]> {
  const { cursor, bindings } = pageClause(page, 'created_at', 'id', [orgId]);
  const result = await db.raw<{ rows: InvitationRow[] }>(`${invitationSelect} WHERE org_id = ? ${cursor} ORDER BY created_at DESC, id DESC LIMIT ?`, bindings);
  return result.rows;
}

/** Revokes the pending invitations of `email` to the organization (a new one replaces them). */
export async function revokePendingInvitationsFor(db: Db, orgId: string, email: string, revokedBy: string): Promise<void> {
  await db.raw(
    `UPDATE invitations SET revoked_at = now(), revoked_by = ?
      WHERE org_id = ? AND email = ? AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()`,
    [revokedBy, orgId, email],
  );
}

/** Revokes every pending invitation to the organization. */
export async function revokeAllPendingInvitations(db: Db, orgId: string, revokedBy: string): Promise<void> {
  await db.raw(
    `UPDATE invitations SET revoked_at = now(), revoked_by = ?
      WHERE org_id = ? AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()`,
    [revokedBy, orgId],
  );
}

export async function markInvitationRevoked(db: Db, invitationId: string, revokedBy: string): Promise<void> {
  await db('invitations')
    .where({ id: invitationId })
    .whereNull('revoked_at')
    .whereNull('accepted_at')
    .update({ revoked_at: db.fn.now(), revoked_by: revokedBy });
}

export async function markInvitationAccepted(db: Db, invitationId: string, acceptedBy: string): Promise<void> {
  await db('invitations').where({ id: invitationId }).update({ accepted_at: db.fn.now(), accepted_by: acceptedBy });
}
