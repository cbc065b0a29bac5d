import { randomBase62 } from './ids.js';
import { sha256Hex } from './secrets.js';

/**
 * The full key (docs/api/keys.md#the-full-key): `sb_` + 43 base62 characters from the CSPRNG (≈256 bits) + a
 * 6-character base62 CRC-32 of everything before it. The checksum lets secret scanners (and
 * AuthorizeKey, without a lookup) tell a real key from a typo or noise; it is no secret and adds
 * no strength. Only the SHA-256 and a display hint are stored.
 */

export const keyPrefix = 'sb_';
const randomLength = 43;
const checksumLength = 6;
export const fullKeyLength = keyPrefix.length + randomLength + checksumLength;
const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const shape = new RegExp(`^${keyPrefix}[0-9A-Za-z]{${randomLength + checksumLength}}$`);

const crcTable = Uint32Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

/** CRC-32 (IEEE, as zlib and GitHub's token checksums) of an ASCII string. */
function crc32(text: string): number {
  let crc = 0xffffffff;
  for (let i = 0; i < text.length; i++) crc = crcTable[(crc ^ text.charCodeAt(i)) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function checksumOf(body: string): string {
  let value = crc32(body);
  let out = '';
  for (let i = 0; i < checksumLength; i++) {
    out = alphabet[value % 62] + out;
    value = Math.floor(value / 62);
  }
  return out;
}

export function generateFullKey(): string {
  const body = keyPrefix + randomBase62(randomLength);
  return body + checksumOf(body);
}

/** Whether `candidate` has the shape and checksum of a key we issue (no lookup, no timing secret: the checksum is public). */
export function isWellFormedKey(candidate: string): boolean {
  if (candidate.length !== fullKeyLength || !shape.test(candidate)) return false;
  const cut = candidate.length - checksumLength;
  return checksumOf(candidate.slice(0, cut)) === candidate.slice(cut);
}

/** What is stored and looked up: the hex SHA-256 of the full key. */
export const hashKey = (fullKey: string): string => sha256Hex(fullKey);

/** The display hint, e.g. `sb_…a1b2`. */
export const hintOf = (fullKey: string): string => `${keyPrefix}…${fullKey.slice(-4)}`;
