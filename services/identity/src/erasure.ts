import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import { startPeriodic } from '@switchboard/runtime/periodic';
import type { BackgroundTask } from '@switchboard/runtime/service';
import type { LoginThrottle } from './login-throttle.js';
import { pruneExpiredTokens } from './store/housekeeping.js';
import { lockUsersDueForErasure, pseudonymizeUser } from './store/users.js';

/**
 * The erasure job (GDPR): accounts deactivated longer than ACCOUNT_ERASE_AFTER get placeholder
 * personal data (`erased+<user id>@erased.invalid`, no name, no usable password, no 2FA data);
 * the user id stays, so billing records keep pointing at a pseudonymous account. Replicas share
 * the work through `FOR UPDATE SKIP LOCKED`.
 */

const batchSize = 100;

/** Erases every account due at `now`; returns their ids. */
export async function eraseDueAccounts(db: Knex, now: Date): Promise<string[]> {
  const erased: string[] = [];
  for (;;) {
    const batch = await db.transaction(async (trx) => {
      const due = await lockUsersDueForErasure(trx, now, batchSize);
      for (const user of due) await pseudonymizeUser(trx, { id: user.id, personalWorkspaceId: user.personal_workspace_id }, now);
      return due.map((user) => user.id);
    });
    erased.push(...batch);
    if (batch.length < batchSize) return erased;
  }
}

/** Runs the erasure and prunes old brute-force counters and expired tokens every `intervalMs`. */
export function startHousekeeping(options: { db: Knex; log: Logger; throttle: LoginThrottle; intervalMs: number; clock?: Clock }): BackgroundTask {
  const clock = options.clock ?? systemClock;
  return startPeriodic({
    name: 'housekeeping',
    everyMs: options.intervalMs,
    firstRunAfterMs: 1000,
    log: options.log,
    async run() {
      const erased = await eraseDueAccounts(options.db, clock());
      if (erased.length > 0) options.log.info({ user_ids: erased }, 'erased deactivated accounts');
      await options.throttle.prune();
      // Kept a day past expiry, for support questions about a refused token.
      await pruneExpiredTokens(options.db, new Date(clock().getTime() - 24 * 3600 * 1000));
    },
  });
}
