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
  const updated = await db('users').where({ id: userId, password_hash: previousHash }).update({ password_hash: passwordHash, updated_at: db.fn.now() });
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

export async function insertEmailVerification(db: Db, verification: { tokenHash: string; userId: string; email: string; expiresAt: Date }): Promise<void> {
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
  return db('signing_keys').select(signingKeyColumns).where({ status: 'active' }).orWhere('retired_at', '>', retiredSince).orderBy('created_at', 'desc');
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
/**
 * The keyset condition of a page after `page.after` (newest first by time, then id) and the
 * bindings of the query it goes in: `leading` before it, the LIMIT of `limit + 1` rows after.
 */
function pageClause(page: PageQuery, timeColumn: string, idColumn: string, leading: Knex.RawBinding[]): { cursor: string; bindings: Knex.RawBinding[] } {
  const bindings = [...leading];
  let cursor = '';
  if (page.after) {
    cursor = `AND (${timeColumn}, ${idColumn}) < (timestamptz 'epoch' + ?::bigint * interval '1 microsecond', ?)`;
    bindings.push(page.after.micros, page.after.id);
  }
  bindings.push(page.limit + 1);
  return { cursor, bindings };
}

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
  const { cursor, bindings } = pageClause(page, 'm.created_at', 'm.org_id', [userId]);
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

// --- account management (issue 3) ----------------------------------------------------------------

export interface SessionRow {
  id: string;
  user_id: string;
  aal: string;
  created_at: Date;
  last_used_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
}

export interface RefreshTokenRow {
  token_hash: string;
  session_id: string;
  parent_hash: string | null;
  created_at: Date;
  used_at: Date | null;
  successor_hash: string | null;
  successor_nonce: string | null;
}

/** The refresh token and its session, both locked for the rotation. */
export async function lockRefreshToken(db: Db, tokenHash: string): Promise<{ token: RefreshTokenRow; session: SessionRow } | undefined> {
  const token = (await db('refresh_tokens').where({ token_hash: tokenHash }).forUpdate().first()) as RefreshTokenRow | undefined;
  if (!token) return undefined;
  const session = (await db('sessions').where({ id: token.session_id }).forUpdate().first()) as SessionRow;
  return { token, session };
}

/** The session of a refresh token, when that session is `userId`'s. */
export async function findUsersSessionOfRefreshToken(db: Db, tokenHash: string, userId: string): Promise<string | undefined> {
  const row = await db('refresh_tokens as t')
    .join('sessions as s', 's.id', 't.session_id')
    .where({ 't.token_hash': tokenHash, 's.user_id': userId })
    .first('s.id');
  return row?.id;
}

export async function findRefreshToken(db: Db, tokenHash: string): Promise<RefreshTokenRow | undefined> {
  return db('refresh_tokens').where({ token_hash: tokenHash }).first();
}

/**
 * Locks the user row against concurrent password changes and deactivation (FOR SHARE) while a
 * session is opened: a sign-in racing a reset, a password change or a deactivation either
 * finishes first (and its session is revoked by them) or sees their result.
 */
export async function lockUserForSession(db: Db, userId: string): Promise<{ password_hash: string; deactivated_at: Date | null } | undefined> {
  return db('users').select('password_hash', 'deactivated_at').where({ id: userId }).forShare().first();
}

/** Whether the user's password changed after `since` (database clock on both sides). */
export async function passwordChangedSince(db: Db, userId: string, since: Date): Promise<boolean> {
  return Boolean(await db('users').where({ id: userId }).where('password_changed_at', '>', since).first(db.raw('1 AS changed')));
}

export async function markRefreshTokenUsed(db: Db, tokenHash: string, successor: { hash: string; nonce: string }, at: Date): Promise<void> {
  await db('refresh_tokens').where({ token_hash: tokenHash }).update({ used_at: at, successor_hash: successor.hash, successor_nonce: successor.nonce });
}

export async function touchSession(db: Db, sessionId: string, at: Date): Promise<void> {
  await db('sessions').where({ id: sessionId }).update({ last_used_at: at });
}

export async function findSession(db: Db, sessionId: string): Promise<SessionRow | undefined> {
  return db('sessions').where({ id: sessionId }).first();
}

/** Revokes the user's live sessions that match; returns the ids actually revoked. */
export async function revokeUserSessions(db: Db, input: { userId: string; reason: string; at: Date; only?: string[]; except?: string }): Promise<string[]> {
  const query = db('sessions').where({ user_id: input.userId }).whereNull('revoked_at');
  if (input.only) query.whereIn('id', input.only);
  if (input.except) query.whereNot('id', input.except);
  const rows = (await query.update({ revoked_at: input.at, revoked_reason: input.reason }).returning(['id'])) as Array<{ id: string }>;
  return rows.map((row) => row.id);
}

export async function findRevokedSessions(db: Db, since: Date): Promise<Array<{ id: string; revoked_at: Date }>> {
  return db('sessions').select('id', 'revoked_at').where('revoked_at', '>=', since).orderBy('revoked_at');
}

// users

export async function updateFullName(db: Db, userId: string, fullName: string): Promise<UserRow | undefined> {
  const [row] = await db('users').where({ id: userId }).update({ full_name: fullName, updated_at: db.fn.now() }).returning(userColumns);
  return row as UserRow | undefined;
}

export async function setPasswordHash(db: Db, userId: string, passwordHash: string): Promise<void> {
  await db('users').where({ id: userId }).update({ password_hash: passwordHash, password_changed_at: db.fn.now(), updated_at: db.fn.now() });
}

export async function lockUser(db: Db, userId: string): Promise<UserRow | undefined> {
  return db('users').select(userColumns).where({ id: userId }).forUpdate().first();
}

export async function setTwoFactorEnabled(db: Db, userId: string, enabled: boolean): Promise<void> {
  await db('users').where({ id: userId }).update({ two_factor_enabled: enabled, updated_at: db.fn.now() });
}

export async function markDeactivated(db: Db, userId: string, at: Date, eraseAfter: Date): Promise<void> {
  await db('users').where({ id: userId }).update({ deactivated_at: at, erase_after: eraseAfter, updated_at: db.fn.now() });
}

// email verification

export async function lockEmailVerification(
  db: Db,
  tokenHash: string,
): Promise<{ user_id: string; email: string; expires_at: Date; used_at: Date | null } | undefined> {
  return db('email_verifications').select('user_id', 'email', 'expires_at', 'used_at').where({ token_hash: tokenHash }).forUpdate().first();
}

export async function completeEmailVerification(db: Db, tokenHash: string, userId: string, email: string, at: Date): Promise<boolean> {
  await db('email_verifications').where({ token_hash: tokenHash }).update({ used_at: at });
  const updated = await db('users').where({ id: userId, email }).update({ email_verified_at: at, updated_at: db.fn.now() });
  return updated === 1;
}

// password resets

export interface PasswordResetRow {
  token_hash: string;
  user_id: string;
  expires_at: Date;
  used_at: Date | null;
}

export async function insertPasswordReset(db: Db, reset: { tokenHash: string; userId: string; expiresAt: Date }): Promise<void> {
  await db('password_resets').insert({ token_hash: reset.tokenHash, user_id: reset.userId, expires_at: reset.expiresAt });
}

/** How many reset tokens the user was sent in the last `withinSeconds` (database clock). */
export async function countRecentPasswordResets(db: Db, userId: string, withinSeconds: number): Promise<number> {
  const row = await db('password_resets')
    .where({ user_id: userId })
    .where('created_at', '>', db.raw(`now() - make_interval(secs => ?)`, [withinSeconds]))
    .count<{ count: string }[]>('* as count');
  return Number(row[0].count);
}

export async function findPasswordReset(db: Db, tokenHash: string, lock = false): Promise<PasswordResetRow | undefined> {
  const query = db('password_resets').select('token_hash', 'user_id', 'expires_at', 'used_at').where({ token_hash: tokenHash });
  if (lock) query.forUpdate();
  return query.first();
}

/** Uses every outstanding reset token of the user (the one redeemed and any older ones). */
export async function usePasswordResets(db: Db, userId: string, at: Date): Promise<void> {
  await db('password_resets').where({ user_id: userId }).whereNull('used_at').update({ used_at: at });
}

// two-factor

export interface TwoFactorRow {
  user_id: string;
  secret_encrypted: string | null;
  enabled_at: Date | null;
  pending_secret_encrypted: string | null;
  last_used_step: string | null;
}

export async function findTwoFactor(db: Db, userId: string): Promise<TwoFactorRow | undefined> {
  return db('two_factor').where({ user_id: userId }).first();
}

export async function savePendingTwoFactor(db: Db, userId: string, pendingSecretEncrypted: string): Promise<void> {
  await db('two_factor')
    .insert({ user_id: userId, pending_secret_encrypted: pendingSecretEncrypted })
    .onConflict('user_id')
    .merge({ pending_secret_encrypted: pendingSecretEncrypted });
}

/**
 * Activates the pending secret if it is still `pendingSecretEncrypted` and `step` is later than
 * the last accepted one, in one statement (no code is accepted twice, even concurrently).
 */
export async function activateTwoFactor(db: Db, userId: string, pendingSecretEncrypted: string, step: number, at: Date): Promise<boolean> {
  const updated = await db('two_factor')
    .where({ user_id: userId, pending_secret_encrypted: pendingSecretEncrypted })
    .whereNull('secret_encrypted')
    .where((q) => q.whereNull('last_used_step').orWhere('last_used_step', '<', step))
    .update({ secret_encrypted: pendingSecretEncrypted, pending_secret_encrypted: null, enabled_at: at, last_used_step: step });
  return updated === 1;
}

/** Records `step` as used if it is later than the last accepted one; false when it is not. */
export async function claimTotpStep(db: Db, userId: string, step: number): Promise<boolean> {
  const updated = await db('two_factor')
    .where({ user_id: userId })
    .whereNotNull('secret_encrypted')
    .where((q) => q.whereNull('last_used_step').orWhere('last_used_step', '<', step))
    .update({ last_used_step: step });
  return updated === 1;
}

export async function deleteTwoFactor(db: Db, userId: string): Promise<void> {
  await db('two_factor').where({ user_id: userId }).delete();
  await db('recovery_codes').where({ user_id: userId }).delete();
}

export async function replaceRecoveryCodes(db: Db, userId: string, codeHashes: string[]): Promise<void> {
  await db('recovery_codes').where({ user_id: userId }).delete();
  await db('recovery_codes').insert(codeHashes.map((codeHash) => ({ user_id: userId, code_hash: codeHash })));
}

/** Uses one recovery code; false when it is unknown or used already. */
export async function consumeRecoveryCode(db: Db, userId: string, codeHash: string, at: Date): Promise<boolean> {
  const updated = await db('recovery_codes').where({ user_id: userId, code_hash: codeHash }).whereNull('used_at').update({ used_at: at });
  return updated === 1;
}

export async function countRecoveryCodes(db: Db, userId: string): Promise<number> {
  const row = (await db('recovery_codes').where({ user_id: userId }).whereNull('used_at').count<{ count: string }[]>('* as count'))[0];
  return Number(row?.count ?? 0);
}

// sign-in challenges

export interface MfaChallengeRow {
  token_hash: string;
  user_id: string;
  created_at: Date;
  expires_at: Date;
  attempts: number;
  used_at: Date | null;
}

export async function insertMfaChallenge(db: Db, challenge: { tokenHash: string; userId: string; expiresAt: Date }): Promise<void> {
  await db('mfa_challenges').insert({ token_hash: challenge.tokenHash, user_id: challenge.userId, expires_at: challenge.expiresAt });
}

export async function lockMfaChallenge(db: Db, tokenHash: string): Promise<MfaChallengeRow | undefined> {
  return db('mfa_challenges').where({ token_hash: tokenHash }).forUpdate().first();
}

export async function updateMfaChallenge(db: Db, tokenHash: string, change: { attempts?: number; used_at?: Date }): Promise<void> {
  await db('mfa_challenges').where({ token_hash: tokenHash }).update(change);
}

// brute-force counters

/** Inserts a failure row; returns its id. */
export async function insertAuthFailure(db: Db, failure: { kind: string; scope: string; subject: string; at: Date }): Promise<string> {
  const [row] = (await db('auth_failures')
    .insert({ kind: failure.kind, scope: failure.scope, subject: failure.subject, created_at: failure.at })
    .returning(['id'])) as Array<{ id: string }>;
  return String(row.id);
}

export async function deleteAuthFailures(db: Db, ids: string[]): Promise<void> {
  if (ids.length > 0) await db('auth_failures').whereIn('id', ids).delete();
}

/** Failures of one counter since `since` but `excludeIds`, oldest first (at most `limit`). */
export async function recentAuthFailures(
  db: Db,
  counter: { kind: string; scope: string; subject: string },
  since: Date,
  limit: number,
  excludeIds: string[] = [],
): Promise<Date[]> {
  const rows = (await db('auth_failures')
    .select('created_at')
    .where({ kind: counter.kind, scope: counter.scope, subject: counter.subject })
    .where('created_at', '>', since)
    .whereNotIn('id', excludeIds)
    .orderBy('created_at', 'desc')
    .limit(limit)) as Array<{ created_at: Date }>;
  return rows.map((row) => row.created_at).reverse();
}

export async function clearAuthFailures(db: Db, counter: { kind: string; scope: string; subject: string }): Promise<void> {
  await db('auth_failures').where(counter).delete();
}

export async function pruneAuthFailures(db: Db, before: Date): Promise<number> {
  return db('auth_failures').where('created_at', '<', before).delete();
}

// deactivation and erasure

export interface OrganizationMembershipRow {
  org_id: string;
  role: string;
  personal: boolean;
  member_count: number;
}

/** Every organization of the user with its role there and the number of members. */
/**
 * The user's memberships with each organization's member count. The organizations are locked
 * first (in id order, like every membership change locks its organization), so a concurrent
 * transfer, invitation or removal cannot change them between this read and the caller's writes.
 */
export async function findMembershipsWithCounts(db: Db, userId: string): Promise<OrganizationMembershipRow[]> {
  await db.raw('SELECT o.id FROM organizations o JOIN memberships m ON m.org_id = o.id AND m.user_id = ? ORDER BY o.id FOR UPDATE OF o', [userId]);
  const result = await db.raw<{ rows: Array<OrganizationMembershipRow & { member_count: string }> }>(
    `SELECT m.org_id, m.role, o.personal, (SELECT count(*) FROM memberships x WHERE x.org_id = m.org_id) AS member_count
       FROM memberships m JOIN organizations o ON o.id = m.org_id
      WHERE m.user_id = ?
      ORDER BY m.org_id`,
    [userId],
  );
  return result.rows.map((row) => ({ ...row, member_count: Number(row.member_count) }));
}

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
  const { cursor, bindings } = pageClause(page, 'm.created_at', 'm.user_id', [orgId]);
  const result = await db.raw<{ rows: MemberRow[] }>(
    `${memberSelect} WHERE m.org_id = ? ${cursor} ORDER BY m.created_at DESC, m.user_id DESC LIMIT ?`,
    bindings,
  );
  return result.rows;
}

/** A second owner was refused by the unique partial index memberships_one_owner. */
export class SecondOwnerError extends Error {}

/** Sets a member's role; false when the membership no longer exists. */
export async function updateMemberRole(db: Db, orgId: string, userId: string, role: string): Promise<boolean> {
  try {
    return (await db('memberships').where({ org_id: orgId, user_id: userId }).update({ role })) === 1;
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

/** Users whose grace period ended and who are not erased yet (locked, skipping locked rows). */
export async function lockUsersDueForErasure(db: Db, now: Date, limit: number): Promise<Array<{ id: string; personal_workspace_id: string }>> {
  return db('users')
    .select('id', 'personal_workspace_id')
    .whereNotNull('erase_after')
    .whereNull('erased_at')
    .where('erase_after', '<=', now)
    .orderBy('erase_after')
    .limit(limit)
    .forUpdate()
    .skipLocked();
}

/** Replaces the personal data of a user by placeholders and drops their credentials. */
export async function pseudonymizeUser(db: Db, user: { id: string; personalWorkspaceId: string }, at: Date): Promise<void> {
  const placeholder = `erased+${user.id}@erased.invalid`;
  // Invitations to the address (other organizations list them) lose it too.
  await db('invitations')
    .whereIn('email', db('users').select('email').where({ id: user.id }))
    .update({ email: placeholder });
  await db('users').where({ id: user.id }).update({ email: placeholder, full_name: null, password_hash: '!erased', erased_at: at, updated_at: db.fn.now() });
  await db('organizations').where({ id: user.personalWorkspaceId }).update({ name: 'Erased account workspace' });
  await db('two_factor').where({ user_id: user.id }).delete();
  await db('recovery_codes').where({ user_id: user.id }).delete();
  await db('email_verifications').where({ user_id: user.id }).delete();
  await db('password_resets').where({ user_id: user.id }).delete();
  await db('mfa_challenges').where({ user_id: user.id }).delete();
}

/** Drops sign-in challenges and reset tokens that expired before `before`. */
export async function pruneExpiredTokens(db: Db, before: Date): Promise<number> {
  const challenges = await db('mfa_challenges').where('expires_at', '<', before).delete();
  const resets = await db('password_resets').where('expires_at', '<', before).delete();
  const verifications = await db('email_verifications').where('expires_at', '<', before).delete();
  // Sessions that ended; their refresh tokens go with them (rotated ones are kept while the
  // session lives, so a replay of any of them is recognised as reuse).
  const sessions = await db('sessions')
    .where((ended) => ended.where('expires_at', '<', before).orWhere('revoked_at', '<', before))
    .delete();
  return challenges + resets + verifications + sessions;
}
