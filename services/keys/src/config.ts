import { readDuration } from '@switchboard/runtime/config';

/**
 * The settings of the keys service (docs/operations.md), read once at start by main.ts and passed
 * down; a malformed value stops the start, naming its variable.
 */
export interface KeysConfig {
  /** RESERVATION_TTL: how long an unsettled reservation holds its amount (10m; tests shorten it). */
  reservationTtlMs: number;
  /** HOUSEKEEPING_INTERVAL: how often old reservations are pruned. */
  housekeepingIntervalMs: number;
}

export function readKeysConfig(env: Record<string, string | undefined> = process.env): KeysConfig {
  return {
    reservationTtlMs: readDuration('RESERVATION_TTL', '10m', env),
    housekeepingIntervalMs: readDuration('HOUSEKEEPING_INTERVAL', '1h', env, 1),
  };
}
