import type { Db } from '@switchboard/runtime/sql';

// Mailed email-verification tokens (stored hashed).

export async function insertEmailVerification(db: Db, verification: { tokenHash: string; userId: string; email: string; expiresAt: Date }): Promise<void> {
  await db('email_verifications').insert({
    token_hash: verification.tokenHash,
    user_id: verification.userId,
    email: verification.email,
    expires_at: verification.expiresAt,
  });
}

/** Tokens issued to the user within the last `withinSeconds` (each was mailed). */
export async function countRecentEmailVerifications(db: Db, userId: string, withinSeconds: number): Promise<number> {
  const row = await db('email_verifications')
    .where({ user_id: userId })
    .where('created_at', '>', db.raw(`now() - make_interval(secs => ?)`, [withinSeconds]))
    .count<{ count: string }[]>('* as count');
  return Number(row[0].count);
}

export async function lockEmailVerification(
  db: Db,
  tokenHash: string,
): Promise<{ user_id: string; email: string; expires_at: Date; used_at: Date | null } | undefined> {
  return db('email_verifications').select('user_id', 'email', 'expires_at', 'used_at').where({ token_hash: tokenHash }).forUpdate().first();
}

/**
 * Marks the token used and the user's address verified; the user's personal workspace, or
 * undefined when the user no longer has that address.
 */
export async function completeEmailVerification(
  db: Db,
  tokenHash: string,
  userId: string,
  email: string,
  at: Date,
): Promise<{ personalWorkspaceId: string } | undefined> {
  await db('email_verifications').where({ token_hash: tokenHash }).update({ used_at: at });
  const [updated] = await db('users')
    .where({ id: userId, email })
    .update({ email_verified_at: at, updated_at: db.fn.now() })
    .returning<Array<{ personal_workspace_id: string }>>('personal_workspace_id');
  return updated && { personalWorkspaceId: updated.personal_workspace_id };
}
