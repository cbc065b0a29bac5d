import type { Db } from '@switchboard/runtime/sql';

// The access-token signing keys (private JWK encrypted).

export interface SigningKeyRow {
  kid: string;
  alg: string;
  public_jwk: Record<string, unknown>;
  private_jwk_encrypted: string;
  status: 'active' | 'retired';
  created_at: Date;
  retired_at: Date | null;
}

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
