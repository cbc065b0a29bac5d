import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import type { BackgroundTask } from '@switchboard/runtime/service';
import { pruneReservations } from './store/reservations.js';

/** Deletes reservations that stopped counting a day ago, every `intervalMs`. */
export function startHousekeeping(deps: { db: Knex; log: Logger; intervalMs: number }): BackgroundTask {
  const timer = setInterval(() => {
    pruneReservations(deps.db)
      .then((deleted) => deleted > 0 && deps.log.info({ deleted }, 'pruned old reservations'))
      .catch((err) => deps.log.warn({ err: (err as Error).message }, 'reservation pruning failed; retrying later'));
  }, deps.intervalMs);
  timer.unref();
  return { stop: async () => clearInterval(timer) };
}
