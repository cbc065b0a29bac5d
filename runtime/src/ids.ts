import { randomBytes } from 'node:crypto';

const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `length` base62 characters from the CSPRNG, without modulo bias. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += alphabet[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** An opaque prefixed id such as `usr_3kT…` (≈131 bits of randomness). */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase62(22)}`;
}

/** A random token for capabilities (reset links, refresh tokens): 256 bits, base64url. */
export function newToken(): string {
  return randomBytes(32).toString('base64url');
}
