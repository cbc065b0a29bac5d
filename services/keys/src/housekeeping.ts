import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { KeyExpiredSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import { startPeriodic } from '@switchboard/runtime/periodic';
import type { BackgroundTask, EventWriter } from '@switchboard/runtime/service';
import { pruneLeases } from './store/cap-leases.js';
import { markExpiredKeys } from './store/keys.js';
import { pruneReservations } from './store/reservations.js';

/**
 * The keys service's sweeps:
 *  - every `intervalMs`, reservations and cap leases that stopped counting a day ago are deleted;
 *  - every `expiryIntervalMs` (at most 10 s), each key whose expiry passed gets its `key.expired`
 *    event, once (docs/api/keys.md#expiry). Refusing the key needs no event (every check reads the
 *    clock), so this is only news for subscribers, and a few seconds late is fine.
 */
export function startHousekeeping(deps: { db: Knex; log: Logger; recordEvent: EventWriter; intervalMs: number; clock?: Clock }): BackgroundTask {
  const pruning = startPeriodic({
    name: 'reservation and lease pruning',
    everyMs: deps.intervalMs,
    log: deps.log,
    async run() {
      const reservations = await pruneReservations(deps.db);
      const leases = await pruneLeases(deps.db);
      if (reservations + leases > 0) deps.log.info({ reservations, leases }, 'pruned old reservations and cap leases');
    },
  });
  const expiries = startPeriodic({
    name: 'key expiry events',
    everyMs: Math.min(deps.intervalMs, maxExpiryIntervalMs),
    log: deps.log,
    async run() {
      await announceExpiredKeys(deps.db, deps.recordEvent, (deps.clock ?? systemClock)());
    },
  });
  return {
    async stop() {
      await Promise.all([pruning.stop(), expiries.stop()]);
    },
  };
}

const maxExpiryIntervalMs = 10_000;
const expiryBatch = 100;

/**
 * Emits `key.expired` for every active key whose expiry passed by `now` and was not announced yet,
 * a batch per transaction (the mark and the events commit together, so each key gets one event
 * however many replicas sweep). Returns how many it announced.
 */
export async function announceExpiredKeys(db: Knex, recordEvent: EventWriter, now: Date): Promise<number> {
  let announced = 0;
  for (;;) {
    const count = await db.transaction(async (trx) => {
      const keys = await markExpiredKeys(trx, now, expiryBatch);
      for (const key of keys) {
        await recordEvent(trx, KeyExpiredSchema, {
          workspaceId: key.workspace_id,
          data: { keyId: key.id, workspaceId: key.workspace_id, expiredAt: timestampFromDate(key.expires_at) },
        });
      }
      return keys.length;
    });
    announced += count;
    if (count < expiryBatch) return announced;
  }
}
