import type { Db } from '@switchboard/runtime/sql';

// Second-factor challenges of a sign-in (mfa_token, stored hashed).

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

export async function findMfaChallenge(db: Db, tokenHash: string): Promise<MfaChallengeRow | undefined> {
  return db('mfa_challenges').where({ token_hash: tokenHash }).first();
}

export async function lockMfaChallenge(db: Db, tokenHash: string): Promise<MfaChallengeRow | undefined> {
  return db('mfa_challenges').where({ token_hash: tokenHash }).forUpdate().first();
}

export async function updateMfaChallenge(db: Db, tokenHash: string, change: { attempts?: number; used_at?: Date }): Promise<void> {
  await db('mfa_challenges').where({ token_hash: tokenHash }).update(change);
}
