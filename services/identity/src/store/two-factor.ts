import type { Db } from '@switchboard/runtime/sql';

// TOTP secrets (encrypted), used time steps and recovery codes (hashed).

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
