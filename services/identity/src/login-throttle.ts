import { Code, type ConnectError } from '@connectrpc/connect';
import type { Knex } from '@switchboard/runtime/db';
import { apiError } from '@switchboard/runtime/errors';
import { systemClock, type Clock } from './clock.js';
import { clearAuthFailures, insertAuthFailure, pruneAuthFailures, recentAuthFailures } from './store.js';

/**
 * Brute-force throttling (SPEC §3, §10), shared by every replica through Postgres: failures
 * are rows of `auth_failures`, per account (the normalized email for passwords, whether or not
 * it is registered, so a 429 never reveals an account; the user id for second factors) and per
 * client IP, with separate counters for passwords and second factors. Once `limit` failures
 * fall within the window, every attempt is refused with 429 and Retry-After (even with the
 * right password) until the limit-th most recent failure leaves the window. The window is
 * 15 minutes and grows with persistence: after a lock-out ends the next `limit` failures lock
 * again for twice as long (15, 30, 60 minutes, at most 2 hours, counting the last 24 hours). Refused attempts are not counted and
 * failures older than 24 hours are forgotten, so a lock-out is never permanent.
 */

export type FailureKind = 'password' | 'second_factor';

export const throttleWindowMs = 15 * 60 * 1000;
/** How far back failures make the window grow, and how long they are kept. */
export const throttleMemoryMs = 24 * 3600 * 1000;
const maxWindowDoublings = 3;

export const throttleLimits: Record<FailureKind, { account: number; ip: number }> = {
  password: { account: 5, ip: 50 },
  second_factor: { account: 10, ip: 50 },
};

export interface ThrottleSubjects {
  /** The account: a normalized email (password) or a user id (second factor). */
  account?: string;
  /** The client address the gateway saw. */
  ip?: string;
}

export class LoginThrottle {
  constructor(
    private readonly db: Knex,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Throws 429 too_many_attempts (with Retry-After) when a counter of `kind` is at its limit. */
  async check(kind: FailureKind, subjects: ThrottleSubjects): Promise<void> {
    const now = this.clock().getTime();
    let retryAt = 0;
    for (const scope of ['account', 'ip'] as const) {
      const subject = subjects[scope];
      if (!subject) continue;
      const limit = throttleLimits[kind][scope];
      // Oldest first: the failures of the last 24 hours (enough of them to size the window).
      const failures = await recentAuthFailures(this.db, { kind, scope, subject }, new Date(now - throttleMemoryMs), limit * (maxWindowDoublings + 1));
      if (failures.length < limit) continue;
      const window = throttleWindowMs * 2 ** Math.min(maxWindowDoublings, Math.floor((failures.length - limit) / limit));
      const limitthMostRecent = failures[failures.length - limit].getTime();
      if (limitthMostRecent + window > now) retryAt = Math.max(retryAt, limitthMostRecent + window);
    }
    if (retryAt > now) throw tooManyAttempts(Math.max(1, Math.ceil((retryAt - now) / 1000)));
  }

  async fail(kind: FailureKind, subjects: ThrottleSubjects): Promise<void> {
    const at = this.clock();
    for (const scope of ['account', 'ip'] as const) {
      const subject = subjects[scope];
      if (subject) await insertAuthFailure(this.db, { kind, scope, subject, at });
    }
  }

  /** A success clears the account's counter (not the IP's: one good account does not clear a spray). */
  async succeed(kind: FailureKind, account: string): Promise<void> {
    await clearAuthFailures(this.db, { kind, scope: 'account', subject: account });
  }

  /** Drops rows older than 24 hours (run by the housekeeping job). */
  prune(): Promise<number> {
    return pruneAuthFailures(this.db, new Date(this.clock().getTime() - throttleMemoryMs));
  }
}

export function tooManyAttempts(retryAfterSeconds: number): ConnectError {
  const err = apiError(Code.ResourceExhausted, 'too_many_attempts', `Too many failed attempts; try again in ${retryAfterSeconds} seconds.`, {
    metadata: { retry_after_seconds: retryAfterSeconds },
  });
  err.metadata.set('retry-after', String(retryAfterSeconds));
  return err;
}
