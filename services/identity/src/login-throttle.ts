import { ConnectError } from '@connectrpc/connect';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { audit } from '@switchboard/runtime/audit';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { retryLater } from '@switchboard/runtime/errors';
import { throttleKeyOfIp } from '@switchboard/runtime/ip';
import type { Logger } from '@switchboard/runtime/log';
import { maskAddress } from '@switchboard/runtime/mail';
import {
  type AttemptDeletion,
  type Counter,
  deleteAttempts,
  insertAttempts,
  pruneAuthFailures,
  recentAttempts,
  settleAttempts,
} from './store/auth-failures.js';

/**
 * Brute-force throttling (docs/api/identity.md#sign-in-throttling), shared by every replica through Postgres: failures
 * are rows of `auth_failures`, per account (the normalized email for passwords, whether or not
 * it is registered, so a 429 never reveals an account; the user id for second factors) and per
 * client IP, with separate counters for passwords and second factors. Once `limit` failures
 * fall within the window, every attempt is refused with 429 and Retry-After (even with the
 * right password) until the limit-th most recent failure leaves the window. The window is
 * 15 minutes and grows with persistence: after a lock-out ends the next `limit` failures lock
 * again for twice as long (15, 30, 60 minutes, at most 2 hours, counting the last 24 hours).
 *
 * An attempt is written as a failure *before* the password or code is checked, then the
 * counters are read: concurrent attempts see each other (a burst cannot slip past the limit
 * while argon2 runs), a refused attempt deletes its rows (never counted), and a successful one
 * deletes them again (`release`/`succeed`). Refused attempts are not counted and
 * failures older than 24 hours are forgotten, so a lock-out is never permanent.
 *
 * Until its check ends, an attempt's rows are pending: they count for `pendingAttemptMs` only,
 * and `fail` settles them as failures. An attempt whose process died mid-check (kill -9, an OOM,
 * a lost database) thus stops counting after a minute instead of locking its account for the
 * whole window: a chaos run found a crash of identity under sign-in load locking the account.
 */

export type FailureKind = 'password' | 'second_factor';

export const throttleWindowMs = 15 * 60 * 1000;
/** How far back failures make the window grow, and how long they are kept. */
export const throttleMemoryMs = 24 * 3600 * 1000;
const maxWindowDoublings = 3;
/** Longer than any check takes (the hasher's deadline, the gateway's call timeout). */
export const pendingAttemptMs = 60_000;

export const throttleLimits: Record<FailureKind, { account: number; ip: number }> = {
  password: { account: 5, ip: 50 },
  second_factor: { account: 10, ip: 50 },
};

export interface ThrottleSubjects {
  /** The account: a normalized email (password) or a user id (second factor). */
  account?: string;
  /** The client address the gateway saw (counted by its /64 when IPv6). */
  ip?: string;
  /** For the audit line of a refusal. */
  requestId?: string;
}

export interface ThrottleAttempt {
  /** The failure rows written for it. */
  ids: string[];
}

/** A subject's throttled sign-ins leave one audit record per this interval, however fast they come. */
const refusalRecordIntervalMs = 60_000;
/** Subjects remembered for that (the oldest forgotten first): bounded memory under a spray of addresses. */
const maxRecordedRefusals = 10_000;

export class LoginThrottle {
  /** When each subject's last throttled sign-in was recorded in the audit log (insertion order = age). */
  private readonly recordedRefusals = new Map<string, number>();

  constructor(private readonly deps: { db: Knex; log: Logger; clock?: Clock }) {}

  /**
   * Whether a throttled sign-in of `subject` goes to the audit log: the first of each minute. A
   * brute force against one account must not cost a write per attempt nor bury the account's
   * real records (kept a year) under copies; every refusal still has its log line (`begin`).
   */
  shouldRecordRefusal(subject: string): boolean {
    const now = this.now().getTime();
    const last = this.recordedRefusals.get(subject);
    if (last !== undefined && now - last < refusalRecordIntervalMs) return false;
    this.recordedRefusals.delete(subject);
    if (this.recordedRefusals.size >= maxRecordedRefusals) {
      const oldest = this.recordedRefusals.keys().next();
      if (!oldest.done) this.recordedRefusals.delete(oldest.value);
    }
    this.recordedRefusals.set(subject, now);
    return true;
  }

  private now(): Date {
    return (this.deps.clock ?? systemClock)();
  }

  /**
   * Starts an attempt: records it as a failure, then refuses it with 429 too_many_attempts
   * (Retry-After) when earlier failures already reach a limit of `kind`.
   */
  async begin(kind: FailureKind, given: ThrottleSubjects): Promise<ThrottleAttempt> {
    const subjects = { account: given.account, ip: given.ip && throttleKeyOfIp(given.ip) };
    const counters = (['account', 'ip'] as const).flatMap((scope) => {
      const subject = subjects[scope];
      // Enough of the latest failures to size the window (it grows with persistence).
      return subject ? [{ scope, subject, limit: throttleLimits[kind][scope] * (maxWindowDoublings + 1) }] : [];
    });
    // Written (and committed) before the counters are read, so concurrent attempts see each other.
    const at = this.now();
    const ids = await insertAttempts(this.deps.db, kind, counters, at, new Date(at.getTime() + pendingAttemptMs));
    try {
      await this.check(kind, counters, ids);
    } catch (err) {
      await deleteAttempts(this.deps.db, { ids });
      audit(this.deps.log, {
        event: `${kind}.throttled`,
        outcome: 'denied',
        // The account of a password counter is an email: only its masked form goes to the log.
        userId: kind === 'second_factor' ? subjects.account : undefined,
        ip: given.ip,
        requestId: given.requestId,
        reason: 'too_many_attempts',
        details: kind === 'password' && subjects.account ? { account: maskAddress(subjects.account) } : undefined,
      });
      throw err;
    }
    return { ids };
  }

  /** The secret was wrong (or there was no account): the attempt counts for the whole window. */
  async fail(attempt: ThrottleAttempt): Promise<void> {
    await settleAttempts(this.deps.db, attempt.ids);
  }

  /** The attempt was no failure after all (it succeeded, or never got to check a secret). */
  async release(attempt: ThrottleAttempt): Promise<void> {
    await deleteAttempts(this.deps.db, { ids: attempt.ids });
  }

  /**
   * Runs the check of the attempt's secret; when it throws instead of answering (the hasher
   * refused: queue full, deadline passed), no secret was checked and the attempt is released.
   */
  async checking<T>(attempt: ThrottleAttempt, check: () => Promise<T>): Promise<T> {
    try {
      return await check();
    } catch (err) {
      await this.release(attempt);
      throw err;
    }
  }

  /**
   * What a success deletes: the attempt's rows and the account's counter (not the IP's: one good
   * account does not clear a spray). `succeed` deletes it; opening a session can instead, in its
   * own statement (`Sessions.open`).
   */
  successDeletion(attempt: ThrottleAttempt, kind: FailureKind, account: string): AttemptDeletion {
    return { ids: attempt.ids, counter: { kind, scope: 'account', subject: account } };
  }

  /** A success: releases the attempt and clears the account's counter, in one statement. */
  async succeed(attempt: ThrottleAttempt, kind: FailureKind, account: string): Promise<void> {
    await deleteAttempts(this.deps.db, this.successDeletion(attempt, kind, account));
  }

  async clearAccount(kind: FailureKind, account: string): Promise<void> {
    await deleteAttempts(this.deps.db, { ids: [], counter: { kind, scope: 'account', subject: account } });
  }

  private async check(kind: FailureKind, counters: Counter[], ownIds: string[]): Promise<void> {
    const now = this.now().getTime();
    let retryAt = 0;
    // Oldest first: the other failures of the last 24 hours, per counter.
    const recent = await recentAttempts(this.deps.db, kind, counters, new Date(now - throttleMemoryMs), ownIds, new Date(now));
    for (const { scope } of counters) {
      const limit = throttleLimits[kind][scope as 'account' | 'ip'];
      const failures = recent.get(scope) ?? [];
      if (failures.length < limit) continue;
      const window = throttleWindowMs * 2 ** Math.min(maxWindowDoublings, Math.floor((failures.length - limit) / limit));
      const limitthMostRecent = failures[failures.length - limit].getTime();
      if (limitthMostRecent + window > now) retryAt = Math.max(retryAt, limitthMostRecent + window);
    }
    if (retryAt > now) throw tooManyAttempts(Math.max(1, Math.ceil((retryAt - now) / 1000)));
  }

  /** Drops rows older than 24 hours (run by the housekeeping job). */
  prune(): Promise<number> {
    return pruneAuthFailures(this.deps.db, new Date(this.now().getTime() - throttleMemoryMs));
  }
}

/** True for the refusal of `begin` (429 too_many_attempts). */
export function isTooManyAttempts(err: unknown): boolean {
  return err instanceof ConnectError && err.findDetails(ErrorDetailSchema).some((detail) => detail.code === 'too_many_attempts');
}

export function tooManyAttempts(retryAfterSeconds: number): ConnectError {
  return retryLater('too_many_attempts', `Too many failed attempts; try again in ${retryAfterSeconds} seconds.`, retryAfterSeconds);
}
