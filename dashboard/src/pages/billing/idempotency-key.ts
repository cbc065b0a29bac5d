/**
 * A new idempotency key for one intended top-up (docs/conventions.md, Idempotency). 128 random
 * bits from getRandomValues, which, unlike randomUUID, also exists on a page served over plain
 * HTTP.
 */
export function newIdempotencyKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `dashboard-${Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}
