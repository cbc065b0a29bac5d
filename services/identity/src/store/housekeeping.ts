import type { Db } from '@switchboard/runtime/sql';

// Pruning of expired single-use tokens.

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
