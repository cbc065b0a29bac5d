import { type Db, isUniqueViolation } from '@switchboard/runtime/sql';

// Accounts: credentials, 2FA flag, deactivation and erasure.

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

/** Whether the user's password changed after `since` (database clock on both sides). */
export async function passwordChangedSince(db: Db, userId: string, since: Date): Promise<boolean> {
  return Boolean(await db('users').where({ id: userId }).where('password_changed_at', '>', since).first(db.raw('1 AS changed')));
}

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
  // Where the user signed in from is personal data too (docs/api/identity.md#signed-in-sessions).
  await db('sessions').where({ user_id: user.id }).update({ ip: null, user_agent: null });
  // Their data exports are copies of all of it.
  await db('data_exports').where({ user_id: user.id }).delete();
}
