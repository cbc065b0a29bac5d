import type { Knex } from '@switchboard/runtime/db';

/**
 * Every SQL statement of the identity service. Functions take the pool or a transaction, so
 * domain modules decide what runs together; tables are unqualified (search_path = identity).
 */
export type Db = Knex | Knex.Transaction;

export interface UserRow {
  id: string;
  email: string;
  email_verified_at: Date | null;
  full_name: string | null;
  password_hash: string;
  two_factor_enabled: boolean;
  personal_workspace_id: string;
  created_at: Date;
  deactivated_at: Date | null;
}

export interface SigningKeyRow {
  kid: string;
  alg: string;
  public_jwk: Record<string, unknown>;
  private_jwk_encrypted: string;
  status: 'active' | 'retired';
  created_at: Date;
  retired_at: Date | null;
}

/** The address is registered already (unique constraint, also under concurrent sign-ups). */
export class DuplicateEmailError extends Error {}

const userColumns = [
  'id',
  'email',
  'email_verified_at',
  'full_name',
  'password_hash',
  'two_factor_enabled',
  'personal_workspace_id',
  'created_at',
  'deactivated_at',
] as const;

function isUniqueViolation(err: unknown, constraint: string): boolean {
  const error = err as { code?: string; constraint?: string };
  return error?.code === '23505' && error.constraint === constraint;
}

// --- users ----------------------------------------------------------------------------------

export async function findUserByEmail(db: Db, email: string): Promise<UserRow | undefined> {
  return db('users').select(userColumns).where({ email }).first();
}

export async function findUserById(db: Db, id: string): Promise<UserRow | undefined> {
  return db('users').select(userColumns).where({ id }).first();
}

export async function emailRegistered(db: Db, email: string): Promise<boolean> {
  return Boolean(await db('users').where({ email }).first(db.raw('1 AS found')));
}

export async function insertUser(
  db: Db,
  user: { id: string; email: string; fullName: string | null; passwordHash: string; personalWorkspaceId: string },
): Promise<UserRow> {
  try {
    const [row] = await db('users')
      .insert({
        id: user.id,
        email: user.email,
        full_name: user.fullName,
        password_hash: user.passwordHash,
        personal_workspace_id: user.personalWorkspaceId,
      })
      .returning(userColumns);
    return row as UserRow;
  } catch (err) {
    if (isUniqueViolation(err, 'users_email_key')) throw new DuplicateEmailError('email already registered');
    throw err;
  }
}

/** Replaces the hash only if it is still `previousHash` (a concurrent password change wins). */
export async function replacePasswordHash(db: Db, userId: string, previousHash: string, passwordHash: string): Promise<boolean> {
  const updated = await db('users')
    .where({ id: userId, password_hash: previousHash })
    .update({ password_hash: passwordHash, updated_at: db.fn.now() });
  return updated === 1;
}

// --- organizations and memberships -----------------------------------------------------------

export async function insertOrganization(db: Db, organization: { id: string; name: string; personal: boolean }): Promise<{ created_at: Date }> {
  const [row] = await db('organizations').insert(organization).returning(['created_at']);
  return row as { created_at: Date };
}

export async function insertMembership(db: Db, membership: { orgId: string; userId: string; role: string }): Promise<void> {
  await db('memberships').insert({ org_id: membership.orgId, user_id: membership.userId, role: membership.role });
}

export interface ResolvedMembership {
  org_id: string;
  role: string;
  deactivated: boolean;
}

/**
 * The user's membership in `workspaceId` (their personal workspace when empty), in one query on
 * the users and memberships primary keys.
 */
export async function findMembership(db: Db, userId: string, workspaceId: string): Promise<ResolvedMembership | undefined> {
  const result = await db.raw<{ rows: ResolvedMembership[] }>(
    `SELECT m.org_id, m.role, (u.deactivated_at IS NOT NULL) AS deactivated
       FROM users u
       JOIN memberships m ON m.user_id = u.id AND m.org_id = COALESCE(NULLIF(?, ''), u.personal_workspace_id)
      WHERE u.id = ?`,
    [workspaceId, userId],
  );
  return result.rows[0];
}

// --- sessions and refresh tokens ---------------------------------------------------------------

export async function insertSession(db: Db, session: { id: string; userId: string; aal: string; expiresAt: Date }): Promise<void> {
  await db('sessions').insert({ id: session.id, user_id: session.userId, aal: session.aal, expires_at: session.expiresAt });
}

export async function insertRefreshToken(db: Db, token: { tokenHash: string; sessionId: string; parentHash: string | null }): Promise<void> {
  await db('refresh_tokens').insert({ token_hash: token.tokenHash, session_id: token.sessionId, parent_hash: token.parentHash });
}

// --- email verification ------------------------------------------------------------------------

export async function insertEmailVerification(
  db: Db,
  verification: { tokenHash: string; userId: string; email: string; expiresAt: Date },
): Promise<void> {
  await db('email_verifications').insert({
    token_hash: verification.tokenHash,
    user_id: verification.userId,
    email: verification.email,
    expires_at: verification.expiresAt,
  });
}

// --- signing keys ------------------------------------------------------------------------------

const signingKeyColumns = ['kid', 'alg', 'public_jwk', 'private_jwk_encrypted', 'status', 'created_at', 'retired_at'] as const;

export async function findActiveSigningKey(db: Db): Promise<SigningKeyRow | undefined> {
  return db('signing_keys').select(signingKeyColumns).where({ status: 'active' }).first();
}

/** Inserts `key` as the active key unless one is active already; true when it was inserted. */
export async function insertActiveSigningKeyIfNone(
  db: Db,
  key: { kid: string; alg: string; publicJwk: object; privateJwkEncrypted: string },
): Promise<boolean> {
  const inserted = await db('signing_keys')
    .insert({
      kid: key.kid,
      alg: key.alg,
      public_jwk: JSON.stringify(key.publicJwk),
      private_jwk_encrypted: key.privateJwkEncrypted,
      status: 'active',
    })
    .onConflict()
    .ignore()
    .returning(['kid']);
  return inserted.length === 1;
}

/** Keys whose tokens may still be alive: the active one and those retired after `retiredSince`. */
export async function findPublishedSigningKeys(db: Db, retiredSince: Date): Promise<SigningKeyRow[]> {
  return db('signing_keys')
    .select(signingKeyColumns)
    .where({ status: 'active' })
    .orWhere('retired_at', '>', retiredSince)
    .orderBy('created_at', 'desc');
}

// --- organizations, members and invitations (issue 4) -----------------------------------------

/** An organization seen by one of its members. */
export interface MemberOrganizationRow {
  id: string;
  name: string;
  personal: boolean;
  created_at: Date;
  role: string;
  /** When the member joined: the list order and cursor. */
  joined_at: Date;
  cursor_micros: string;
}

export interface PageQuery {
  limit: number;
  after?: { micros: string; id: string };
}

const microsOf = (column: string) => `(extract(epoch from ${column}) * 1000000)::bigint::text`;
const beforeCursor = (timeColumn: string, idColumn: string) =>
  `(${timeColumn}, ${idColumn}) < (timestamptz 'epoch' + ?::bigint * interval '1 microsecond', ?)`;

/**
 * The organization `orgId` with `userId`'s role in it, or undefined when either does not exist
 * or the user is not a member.
 */
export async function findOrganizationOfMember(db: Db, orgId: string, userId: string): Promise<MemberOrganizationRow | undefined> {
  const result = await db.raw<{ rows: MemberOrganizationRow[] }>(
    `SELECT o.id, o.name, o.personal, o.created_at, m.role, m.created_at AS joined_at, ${microsOf('m.created_at')} AS cursor_micros
       FROM organizations o
       JOIN memberships m ON m.org_id = o.id AND m.user_id = ?
      WHERE o.id = ?`,
    [userId, orgId],
  );
  return result.rows[0];
}

/** The user's organizations, most recently joined first; `limit + 1` rows (pageOf cuts). */
export async function listOrganizationsOfUser(db: Db, userId: string, page: PageQuery): Promise<MemberOrganizationRow[]> {
  const bindings: Knex.RawBinding[] = [userId];
  let cursor = '';
  if (page.after) {
    cursor = `AND ${beforeCursor('m.created_at', 'm.org_id')}`;
    bindings.push(page.after.micros, page.after.id);
  }
  bindings.push(page.limit + 1);
  const result = await db.raw<{ rows: MemberOrganizationRow[] }>(
    `SELECT o.id, o.name, o.personal, o.created_at, m.role, m.created_at AS joined_at, ${microsOf('m.created_at')} AS cursor_micros
       FROM memberships m
       JOIN organizations o ON o.id = m.org_id
      WHERE m.user_id = ? ${cursor}
      ORDER BY m.created_at DESC, m.org_id DESC
      LIMIT ?`,
    bindings,
  );
  return result.rows;
}

/** Deletes the organization; memberships and invitations go with it (ON DELETE CASCADE). */
export async function deleteOrganization(db: Db, orgId: string): Promise<void> {
  await db('organizations').where({ id: orgId }).delete();
}

export interface MemberRow {
  user_id: string;
  org_id: string;
  email: string;
  full_name: string | null;
  role: string;
  joined_at: Date;
  cursor_micros: string;
}

const memberSelect = `SELECT m.user_id, m.org_id, u.email, u.full_name, m.role, m.created_at AS joined_at, ${microsOf('m.created_at')} AS cursor_micros
       FROM memberships m
       JOIN users u ON u.id = m.user_id`;

export async function findMember(db: Db, orgId: string, userId: string): Promise<MemberRow | undefined> {
  const result = await db.raw<{ rows: MemberRow[] }>(`${memberSelect} WHERE m.org_id = ? AND m.user_id = ?`, [orgId, userId]);
  return result.rows[0];
}

export async function findMemberByEmail(db: Db, orgId: string, email: string): Promise<MemberRow | undefined> {
  const result = await db.raw<{ rows: MemberRow[] }>(`${memberSelect} WHERE m.org_id = ? AND u.email = ?`, [orgId, email]);
  return result.rows[0];
}

/** Members of the organization, most recently joined first; `limit + 1` rows. */
export async function listMembers(db: Db, orgId: string, page: PageQuery): Promise<MemberRow[]> {
  const bindings: Knex.RawBinding[] = [orgId];
  let cursor = '';
  if (page.after) {
    cursor = `AND ${beforeCursor('m.created_at', 'm.user_id')}`;
    bindings.push(page.after.micros, page.after.id);
  }
  bindings.push(page.limit + 1);
  const result = await db.raw<{ rows: MemberRow[] }>(
    `${memberSelect} WHERE m.org_id = ? ${cursor} ORDER BY m.created_at DESC, m.user_id DESC LIMIT ?`,
    bindings,
  );
  return result.rows;
}

/** A second owner was refused by the unique partial index memberships_one_owner. */
export class SecondOwnerError extends Error {}

export async function updateMemberRole(db: Db, orgId: string, userId: string, role: string): Promise<void> {
  try {
    await db('memberships').where({ org_id: orgId, user_id: userId }).update({ role });
  } catch (err) {
    if (isUniqueViolation(err, 'memberships_one_owner')) throw new SecondOwnerError('the organization has an owner already');
    throw err;
  }
}

export async function deleteMembership(db: Db, orgId: string, userId: string): Promise<boolean> {
  return (await db('memberships').where({ org_id: orgId, user_id: userId }).delete()) === 1;
}

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
  const bindings: Knex.RawBinding[] = [orgId];
  let cursor = '';
  if (page.after) {
    cursor = `AND ${beforeCursor('created_at', 'id')}`;
    bindings.push(page.after.micros, page.after.id);
  }
  bindings.push(page.limit + 1);
  const result = await db.raw<{ rows: InvitationRow[] }>(
    `${invitationSelect} WHERE org_id = ? ${cursor} ORDER BY created_at DESC, id DESC LIMIT ?`,
    bindings,
  );
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

export async function markInvitationRevoked(db: Db, invitationId: string, revokedBy: string): Promise<void> {
  await db('invitations').where({ id: invitationId }).whereNull('revoked_at').whereNull('accepted_at').update({ revoked_at: db.fn.now(), revoked_by: revokedBy });
}

export async function markInvitationAccepted(db: Db, invitationId: string, acceptedBy: string): Promise<void> {
  await db('invitations').where({ id: invitationId }).update({ accepted_at: db.fn.now(), accepted_by: acceptedBy });
}

/**
 * Locks the organization row (FOR UPDATE) until the transaction ends; false when it does not
 * exist. Every change of an organization's members takes this lock first, so the changes of one
 * organization run one after another and each reads (in a later statement) the roles the
 * previous one left.
 */
export async function lockOrganization(db: Db, orgId: string): Promise<boolean> {
  const result = await db.raw<{ rows: unknown[] }>('SELECT id FROM organizations WHERE id = ? FOR UPDATE', [orgId]);
  return result.rows.length === 1;
}
