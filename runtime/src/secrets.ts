import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Secrets at rest, token hashes, and comparisons that do not leak through timing.
 *
 * Encryption is AES-256-GCM under the data-key ring (`SWITCHBOARD_DATA_KEYS`), never under the
 * mesh secret, so rotating the mesh secret leaves stored data readable. Each key of the ring has
 * an id; the first key encrypts, every key decrypts, and every ciphertext names the key it was
 * sealed with (`v2.<key id>.<iv>.<ciphertext>.<tag>`), so a new key can be put in front while
 * old ciphertexts stay readable until they are re-encrypted (`--rotate-data-key`). Each kind of
 * secret (signing keys, TOTP secrets, …) gets its own AES key, derived by HKDF-SHA256 from the
 * data key and a purpose label; the label is also the GCM associated data, so a ciphertext
 * cannot be moved to another purpose.
 */

export class SecretError extends Error {}

const formatVersion = 'v2';
const hkdfSalt = 'switchboard/data-keys/v2';
const ivBytes = 12;
const tagBytes = 16;
const dataKeyBytes = 32;
const keyIdPattern = /^[A-Za-z0-9_-]{1,32}$/;

function checkPurpose(purpose: string): void {
  if (!/^[a-z0-9][a-z0-9._:/-]{0,99}$/.test(purpose)) throw new SecretError(`invalid purpose label ${JSON.stringify(purpose)}`);
}

function seal(aesKey: Buffer, purpose: string, plaintext: string | Uint8Array): { iv: Buffer; ciphertext: Buffer; tag: Buffer } {
  const iv = randomBytes(ivBytes);
  const cipher = createCipheriv('aes-256-gcm', aesKey, iv, { authTagLength: tagBytes });
  cipher.setAAD(Buffer.from(purpose, 'utf8'));
  const data = typeof plaintext === 'string' ? Buffer.from(plaintext, 'utf8') : Buffer.from(plaintext);
  const ciphertext = Buffer.concat([cipher.update(data), cipher.final()]);
  return { iv, ciphertext, tag: cipher.getAuthTag() };
}

function open(aesKey: Buffer, purpose: string, iv: Buffer, ciphertext: Buffer, tag: Buffer): Buffer {
  if (iv.length !== ivBytes || tag.length !== tagBytes) throw new SecretError('not an encrypted secret (bad iv or tag)');
  try {
    const decipher = createDecipheriv('aes-256-gcm', aesKey, iv, { authTagLength: tagBytes });
    decipher.setAAD(Buffer.from(purpose, 'utf8'));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(ciphertext), decipher.final()]);
  } catch {
    throw new SecretError(`cannot decrypt the secret (wrong key or purpose "${purpose}", or tampered data)`);
  }
}

interface DataKey {
  id: string;
  key: Buffer;
}

/** The data keys: the first encrypts, all decrypt. */
export class DataKeyRing {
  private readonly derived = new Map<string, Buffer>();

  private constructor(private readonly keys: readonly DataKey[]) {}

  /**
   * Parses `id:base64-of-32-bytes[,id:…]`; errors name `variable` and the entry (never its key).
   */
  static parse(raw: string, variable = 'SWITCHBOARD_DATA_KEYS'): DataKeyRing {
    const entries = raw.split(',').map((entry) => entry.trim());
    if (entries.length === 0 || entries.every((entry) => entry === '')) throw new SecretError(`${variable} is empty: it needs at least one id:base64 key`);
    const keys: DataKey[] = [];
    entries.forEach((entry, index) => {
      const where = `${variable}, entry ${index + 1}`;
      const colon = entry.indexOf(':');
      if (colon < 0) throw new SecretError(`${where}: expected id:base64-of-32-bytes`);
      const id = entry.slice(0, colon);
      const encoded = entry.slice(colon + 1);
      if (!keyIdPattern.test(id)) throw new SecretError(`${where}: the key id must be 1..32 of A-Z a-z 0-9 _ -`);
      if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(encoded)) throw new SecretError(`${where} (${id}): the key is not base64`);
      const key = Buffer.from(encoded, encoded.includes('-') || encoded.includes('_') ? 'base64url' : 'base64');
      if (key.length !== dataKeyBytes) throw new SecretError(`${where} (${id}): the key must be ${dataKeyBytes} bytes, got ${key.length}`);
      if (keys.some((k) => k.id === id)) throw new SecretError(`${where}: the key id ${id} appears twice`);
      keys.push({ id, key });
    });
    return new DataKeyRing(keys);
  }

  /** A new ring entry `id:base64` with 32 random bytes. */
  static generateEntry(id: string): string {
    if (!keyIdPattern.test(id)) throw new SecretError('the key id must be 1..32 of A-Z a-z 0-9 _ -');
    return `${id}:${randomBytes(dataKeyBytes).toString('base64')}`;
  }

  /** The id of the key that encrypts. */
  get currentKeyId(): string {
    return this.keys[0].id;
  }

  get keyIds(): string[] {
    return this.keys.map((k) => k.id);
  }

  /** The AES key (or HMAC key) of `purpose` under key `keyId`, cached. */
  private subkey(keyId: string, purpose: string): Buffer {
    checkPurpose(purpose);
    const cacheKey = `${keyId}|${purpose}`;
    let derived = this.derived.get(cacheKey);
    if (!derived) {
      const dataKey = this.keys.find((k) => k.id === keyId);
      if (!dataKey) throw new SecretError(`the data key ${keyId} is not in the ring (keys: ${this.keyIds.join(', ')})`);
      derived = Buffer.from(hkdfSync('sha256', dataKey.key, hkdfSalt, `switchboard:${purpose}`, 32));
      this.derived.set(cacheKey, derived);
    }
    return derived;
  }

  /** Encrypts `plaintext` under the current key; `purpose` (e.g. "identity.signing-key") must match on decryption. */
  encrypt(plaintext: string | Uint8Array, purpose: string): string {
    const keyId = this.currentKeyId;
    const { iv, ciphertext, tag } = seal(this.subkey(keyId, purpose), purpose, plaintext);
    return [formatVersion, keyId, iv.toString('base64url'), ciphertext.toString('base64url'), tag.toString('base64url')].join('.');
  }

  /** The raw bytes sealed by `encrypt`, under whichever key of the ring it names. */
  decryptBytes(sealed: string, purpose: string): Buffer {
    const parts = sealed.split('.');
    if (parts[0] === 'v1') throw new SecretError('a secret encrypted before data keys existed (v1): run the service once with --rotate-data-key');
    if (parts.length !== 5 || parts[0] !== formatVersion) throw new SecretError('not an encrypted secret (unknown format)');
    const [, keyId, iv, ciphertext, tag] = parts;
    return open(this.subkey(keyId, purpose), purpose, Buffer.from(iv, 'base64url'), Buffer.from(ciphertext, 'base64url'), Buffer.from(tag, 'base64url'));
  }

  decrypt(sealed: string, purpose: string): string {
    return this.decryptBytes(sealed, purpose).toString('utf8');
  }

  /** Whether `sealed` is already under the current key (nothing to re-encrypt). */
  isCurrent(sealed: string): boolean {
    return sealed.startsWith(`${formatVersion}.${this.currentKeyId}.`);
  }

  /**
   * A value derived from `input` (HMAC-SHA256 under `keyId`'s key for `purpose`, base64url): the
   * same input and key always give the same output, so it need not be stored to be given again.
   * Callers keep the key id beside what they store, so a later key rotation does not change it.
   */
  derive(input: string, purpose: string, keyId = this.currentKeyId): string {
    return createHmac('sha256', this.subkey(keyId, purpose)).update(input, 'utf8').digest('base64url');
  }
}

/**
 * Reads a ciphertext of the format before data keys (`v1.<iv>.<ct>.<tag>`, keys derived by HKDF
 * from the mesh secret). Only the data-key rotation uses it, to move such data under the ring.
 */
export function decryptLegacySecret(sealed: string, purpose: string, meshSecret: string): Buffer {
  checkPurpose(purpose);
  const parts = sealed.split('.');
  if (parts.length !== 4 || parts[0] !== 'v1') throw new SecretError('not a v1 secret');
  const aesKey = Buffer.from(hkdfSync('sha256', Buffer.from(meshSecret, 'utf8'), 'switchboard/secrets/v1', `switchboard:${purpose}`, 32));
  return open(aesKey, purpose, Buffer.from(parts[1], 'base64url'), Buffer.from(parts[2], 'base64url'), Buffer.from(parts[3], 'base64url'));
}

/** Lower-case hex SHA-256, e.g. to store tokens (which carry ≥128 bits) by hash only. */
export function sha256Hex(input: string | Uint8Array): string {
  return createHash('sha256').update(input).digest('hex');
}

/**
 * Compares two strings in time that depends on neither their contents nor their lengths
 * (both sides are hashed first, so unequal lengths take the same path).
 */
export function constantTimeEqual(a: string | Uint8Array, b: string | Uint8Array): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}
