import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Small crypto helpers shared by the services: secrets encrypted at rest, token hashes, and
 * comparisons that do not leak through timing.
 *
 * Encryption is AES-256-GCM with a key derived by HKDF-SHA256 from SWITCHBOARD_MESH_SECRET (or a
 * key passed in) and a purpose label, so each kind of secret (signing keys, TOTP secrets, …) has
 * its own key and a ciphertext cannot be moved to another purpose: the label is also the GCM
 * associated data. Rotating SWITCHBOARD_MESH_SECRET makes existing ciphertexts unreadable.
 */

/** Marks the format: `v1.<iv>.<ciphertext>.<tag>`, each part base64url. */
const formatVersion = 'v1';
const hkdfSalt = 'switchboard/secrets/v1';
const ivBytes = 12;
const tagBytes = 16;
const minimumKeyBytes = 32;

export class SecretError extends Error {}

/** Key material: a string (its UTF-8 bytes) or raw bytes. */
export type KeyMaterial = string | Uint8Array;

const derivedKeys = new Map<string, Buffer>();

function keyMaterial(key: KeyMaterial | undefined): Buffer {
  const source = key ?? process.env.SWITCHBOARD_MESH_SECRET;
  if (source === undefined || source === '') throw new SecretError('SWITCHBOARD_MESH_SECRET is not set: no key to encrypt secrets with');
  const bytes = typeof source === 'string' ? Buffer.from(source, 'utf8') : Buffer.from(source);
  if (bytes.length < minimumKeyBytes) throw new SecretError(`the secret-encryption key must be at least ${minimumKeyBytes} bytes`);
  return bytes;
}

function checkPurpose(purpose: string): void {
  if (!/^[a-z0-9][a-z0-9._:/-]{0,99}$/.test(purpose)) throw new SecretError(`invalid purpose label ${JSON.stringify(purpose)}`);
}

/** The AES-256 key for `purpose` (HKDF-SHA256; cached per key and purpose). */
function deriveKey(purpose: string, key: KeyMaterial | undefined): Buffer {
  checkPurpose(purpose);
  const ikm = keyMaterial(key);
  const cacheKey = `${createHash('sha256').update(ikm).digest('hex')}|${purpose}`;
  let derived = derivedKeys.get(cacheKey);
  if (!derived) {
    derived = Buffer.from(hkdfSync('sha256', ikm, hkdfSalt, `switchboard:${purpose}`, 32));
    if (derivedKeys.size > 100) derivedKeys.clear();
    derivedKeys.set(cacheKey, derived);
  }
  return derived;
}

/**
 * A secret derived from another (HMAC-SHA256 under the key for `purpose`), base64url: the same
 * input always gives the same output, so it need not be stored to be given again.
 */
export function deriveSecret(input: string, purpose: string, key?: KeyMaterial): string {
  return createHmac('sha256', deriveKey(purpose, key)).update(input, 'utf8').digest('base64url');
}

/** Encrypts `plaintext` for storage; `purpose` (e.g. "identity.signing-key") must match on decryption. */
export function encryptSecret(plaintext: string | Uint8Array, purpose: string, key?: KeyMaterial): string {
  const aesKey = deriveKey(purpose, key);
  const iv = randomBytes(ivBytes);
  const cipher = createCipheriv('aes-256-gcm', aesKey, iv, { authTagLength: tagBytes });
  cipher.setAAD(Buffer.from(purpose, 'utf8'));
  const data = typeof plaintext === 'string' ? Buffer.from(plaintext, 'utf8') : Buffer.from(plaintext);
  const ciphertext = Buffer.concat([cipher.update(data), cipher.final()]);
  const tag = cipher.getAuthTag();
  return [formatVersion, iv.toString('base64url'), ciphertext.toString('base64url'), tag.toString('base64url')].join('.');
}

/** The raw bytes sealed by `encryptSecret`; throws SecretError when the key, purpose or data do not match. */
export function decryptSecretBytes(sealed: string, purpose: string, key?: KeyMaterial): Buffer {
  const parts = sealed.split('.');
  if (parts.length !== 4 || parts[0] !== formatVersion) throw new SecretError('not an encrypted secret (unknown format)');
  const [, ivText, ciphertextText, tagText] = parts;
  const iv = Buffer.from(ivText, 'base64url');
  const tag = Buffer.from(tagText, 'base64url');
  if (iv.length !== ivBytes || tag.length !== tagBytes) throw new SecretError('not an encrypted secret (bad iv or tag)');
  const aesKey = deriveKey(purpose, key);
  try {
    const decipher = createDecipheriv('aes-256-gcm', aesKey, iv, { authTagLength: tagBytes });
    decipher.setAAD(Buffer.from(purpose, 'utf8'));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(Buffer.from(ciphertextText, 'base64url')), decipher.final()]);
  } catch {
    throw new SecretError(`cannot decrypt the secret (wrong key or purpose "${purpose}", or tampered data)`);
  }
}

/** The UTF-8 text sealed by `encryptSecret`. */
export function decryptSecret(sealed: string, purpose: string, key?: KeyMaterial): string {
  return decryptSecretBytes(sealed, purpose, key).toString('utf8');
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
