import { readDuration } from '@switchboard/runtime/config';

/**
 * The settings of the keys service (docs/operations.md), read once at start by main.ts and passed
 * down; a malformed value stops the start, naming its variable.
 */
export interface KeysConfig {
  /** RESERVATION_TTL: how long an unsettled reservation holds its amount (10m; tests shorten it). */
  reservationTtlMs: number;
  /** LEASE_TTL: how long a cap lease holds room without a renewal (30s; at least 1s, so a renewal can arrive in time). */
  leaseTtlMs: number;
  /** HOUSEKEEPING_INTERVAL: how often old reservations and leases are pruned. */
  housekeepingIntervalMs: number;
}

export function readKeysConfig(env: Record<string, string | undefined> = process.env): KeysConfig {
  return {
    reservationTtlMs: readDuration('RESERVATION_TTL', '10m', env),
    leaseTtlMs: readDuration('LEASE_TTL', '30s', env, 1000),
    housekeepingIntervalMs: readDuration('HOUSEKEEPING_INTERVAL', '1h', env, 1),
  };
}
