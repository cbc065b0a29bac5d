import { randomBytes, randomFillSync } from 'node:crypto';

const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

// Random bytes drawn from the CSPRNG in blocks: one system call per 4 KiB, not one per id.
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function nextRandomByte(): number {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const byte = pool[poolOffset];
  pool[poolOffset++] = 0; // a byte is used once
  return byte;
}

/** `length` base62 characters from the CSPRNG, without modulo bias. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = nextRandomByte();
    if (byte < 248) out += alphabet[byte % 62];
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

/** A Standard Webhooks signing secret: `whsec_` + base64 of 32 random bytes (docs/webhooks.md#signatures). */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}
