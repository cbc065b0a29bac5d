import type { Knex } from '@switchboard/runtime/db';
import { randomBase62 } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import type { DataKeyRing } from '@switchboard/runtime/secrets';
import { type CryptoKey, calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from 'jose';
import { findActiveSigningKey, findPublishedSigningKeys, insertActiveSigningKeyIfNone, type SigningKeyRow } from './store/signing-keys.js';

/**
 * The ES256 key pair that signs access tokens (docs/api/identity.md#access-tokens). The first start generates it; the
 * private JWK is stored encrypted (AES-256-GCM, key from SWITCHBOARD_MESH_SECRET via HKDF);
 * a unique index lets only one active key exist, so replicas starting together converge on the
 * first one written. The gateway verifies tokens against GET /v1/.well-known/jwks.json.
 */

export const accessTokenIssuer = 'switchboard';
export const accessTokenAudience = 'switchboard-api';
export const accessTokenLifetimeSeconds = 15 * 60;
export const signingAlgorithm = 'ES256';
/** The purpose label of the private keys' encryption (runtime/src/secrets.ts). */
export const signingKeyPurpose = 'identity.signing-key';
/** Retired keys stay published this long, past the life of the tokens they signed. */
const retiredKeyPublishedMs = 24 * 3600 * 1000;
const jwksCacheMs = 30_000;

export interface PublicJwk {
  kty: string;
  crv: string;
  x: string;
  y: string;
  kid: string;
  alg: string;
  use: string;
}

export interface AccessTokenSubject {
  userId: string;
  sessionId: string;
  /** aal1 (password) or aal2 (second factor). */
  aal: string;
}

export interface ActiveKey {
  kid: string;
  privateKey: CryptoKey;
}

/** A fresh key pair: the public JWK, the encrypted private JWK and its thumbprint as kid. */
export async function generateSigningKey(dataKeys: DataKeyRing): Promise<{ kid: string; alg: string; publicJwk: PublicJwk; privateJwkEncrypted: string }> {
  const { publicKey, privateKey } = await generateKeyPair(signingAlgorithm, { extractable: true });
  const publicPart = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(publicPart, 'sha256');
  const privateJwk: JWK = { ...(await exportJWK(privateKey)), kid, alg: signingAlgorithm };
  return {
    kid,
    alg: signingAlgorithm,
    publicJwk: { kty: publicPart.kty!, crv: publicPart.crv!, x: publicPart.x!, y: publicPart.y!, kid, alg: signingAlgorithm, use: 'sig' },
    privateJwkEncrypted: dataKeys.encrypt(JSON.stringify(privateJwk), signingKeyPurpose),
  };
}

export class SigningKeys {
  private active: Promise<ActiveKey> | undefined;
  private published: { keys: PublicJwk[]; until: number } | undefined;

  constructor(private readonly deps: { db: Knex; log: Logger; dataKeys: DataKeyRing }) {}

  /** Ensures an active key exists (generating the first one) and loads it; retried after a failure. */
  ready(): Promise<ActiveKey> {
    this.active ??= this.loadActiveKey().catch((err) => {
      this.active = undefined;
      throw err;
    });
    return this.active;
  }

  /** Returns the active key, creating it when there is none; safe under concurrent first starts. */
  async ensureActiveKey(): Promise<SigningKeyRow> {
    const existing = await findActiveSigningKey(this.deps.db);
    if (existing) return existing;
    const candidate = await generateSigningKey(this.deps.dataKeys);
    if (await insertActiveSigningKeyIfNone(this.deps.db, candidate)) {
      this.deps.log.info({ kid: candidate.kid }, 'generated the access-token signing key');
    }
    const active = await findActiveSigningKey(this.deps.db);
    if (!active) throw new Error('no active signing key after inserting one');
    return active;
  }

  private async loadActiveKey(): Promise<ActiveKey> {
    const row = await this.ensureActiveKey();
    let plaintext: string;
    try {
      plaintext = this.deps.dataKeys.decrypt(row.private_jwk_encrypted, signingKeyPurpose);
    } catch (err) {
      // Not repaired automatically: a replica with a wrong secret must not replace the good key.
      throw new Error(
        `the active signing key ${row.kid} cannot be decrypted (${(err as Error).message}); ` +
          'is SWITCHBOARD_DATA_KEYS missing the key it was encrypted with, or is this the database of another installation? ' +
          "Restore the data key, or retire the signing key (UPDATE identity.signing_keys SET status = 'retired', retired_at = now()) to generate a new one",
      );
    }
    const jwk = JSON.parse(plaintext) as JWK;
    const privateKey = (await importJWK(jwk, signingAlgorithm)) as CryptoKey;
    return { kid: row.kid, privateKey };
  }

  /** A 15-minute access token with exactly sub, sid, aal, iss, aud, exp, iat and jti. */
  async signAccessToken(subject: AccessTokenSubject): Promise<{ token: string; expiresIn: number }> {
    const { kid, privateKey } = await this.ready();
    const issuedAt = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({ sid: subject.sessionId, aal: subject.aal })
      .setProtectedHeader({ alg: signingAlgorithm, kid, typ: 'JWT' })
      .setSubject(subject.userId)
      .setIssuer(accessTokenIssuer)
      .setAudience(accessTokenAudience)
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + accessTokenLifetimeSeconds)
      .setJti(randomBase62(22))
      .sign(privateKey);
    return { token, expiresIn: accessTokenLifetimeSeconds };
  }

  /** The public keys that verify access tokens (cached briefly; they change only at rotation). */
  async publicKeys(): Promise<PublicJwk[]> {
    if (this.published && this.published.until > Date.now()) return this.published.keys;
    const retiredSince = () => new Date(Date.now() - retiredKeyPublishedMs);
    let rows = await findPublishedSigningKeys(this.deps.db, retiredSince());
    if (rows.length === 0) {
      // Publishing needs no private key: only make sure the first key exists.
      await this.ensureActiveKey();
      rows = await findPublishedSigningKeys(this.deps.db, retiredSince());
    }
    const keys = rows.map((row) => {
      const jwk = row.public_jwk as Partial<PublicJwk>;
      return { kty: jwk.kty!, crv: jwk.crv!, x: jwk.x!, y: jwk.y!, kid: row.kid, alg: row.alg, use: 'sig' };
    });
    this.published = { keys, until: Date.now() + jwksCacheMs };
    return keys;
  }
}
