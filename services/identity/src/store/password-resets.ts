import type { Db } from '@switchboard/runtime/sql';

// Mailed password-reset tokens (stored hashed).

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
