import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import { startPeriodic } from '@switchboard/runtime/periodic';
import type { BackgroundTask } from '@switchboard/runtime/service';
import { pruneLeases } from './store/cap-leases.js';
import { pruneReservations } from './store/reservations.js';

/** Deletes reservations and cap leases that stopped counting a day ago, every `intervalMs`. */
export function startHousekeeping(deps: { db: Knex; log: Logger; intervalMs: number }): BackgroundTask {
  return startPeriodic({
    name: 'reservation and lease pruning',
    everyMs: deps.intervalMs,
    log: deps.log,
    async run() {
      const reservations = await pruneReservations(deps.db);
      const leases = await pruneLeases(deps.db);
      if (reservations + leases > 0) deps.log.info({ reservations, leases }, 'pruned old reservations and cap leases');
    },
  });
}
