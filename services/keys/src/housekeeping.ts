import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import { startPeriodic } from '@switchboard/runtime/periodic';
import type { BackgroundTask } from '@switchboard/runtime/service';
import { pruneReservations } from './store/reservations.js';

/** Deletes reservations that stopped counting a day ago, every `intervalMs`. */
export function startHousekeeping(deps: { db: Knex; log: Logger; intervalMs: number }): BackgroundTask {
  return startPeriodic({
    name: 'reservation pruning',
    everyMs: deps.intervalMs,
    log: deps.log,
    async run() {
      const deleted = await pruneReservations(deps.db);
      if (deleted > 0) deps.log.info({ deleted }, 'pruned old reservations');
    },
  });
}
