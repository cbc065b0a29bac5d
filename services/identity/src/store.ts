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
