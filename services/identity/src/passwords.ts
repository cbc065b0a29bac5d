import { randomBytes } from 'node:crypto';
import { Code, ConnectError } from '@connectrpc/connect';
import { apiError, invalidArgument, retryLater } from '@switchboard/runtime/errors';
import argon2 from 'argon2';
import { commonPasswords } from './common-passwords.js';

/**
 * Password policy and hashing (docs/api/identity.md#passwords): argon2id with OWASP's m=19456 KiB, t=2, p=1; the
 * parameters live in the PHC string, so a parameter change rehashes on the next login.
 */

export const argon2Parameters = { memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;

export const minPasswordLength = 8;
export const maxPasswordLength = 128;

/** Length in Unicode code points (an emoji counts once). */
export function codePointLength(value: string): number {
  let count = 0;
  for (const _ of value) count++;
  return count;
}

/**
 * Throws a 400 on `field` when `password` breaks the policy: 8..128 characters, not the email,
 * not a common password. No composition rules.
 */
export function assertAcceptablePassword(password: string, email: string, field = 'password'): void {
  const length = codePointLength(password);
  if (length === 0) throw invalidArgument(field, 'A password is required.');
  if (length < minPasswordLength) {
    throw apiError(Code.InvalidArgument, 'weak_password', `The password must be at least ${minPasswordLength} characters long.`, { field });
  }
  if (length > maxPasswordLength) throw invalidArgument(field, `The password must be at most ${maxPasswordLength} characters long.`);
  const lowered = password.toLowerCase();
  if (email !== '' && lowered === email.toLowerCase()) {
    throw apiError(Code.InvalidArgument, 'weak_password', 'The password must not be your email address.', { field });
  }
  if (commonPasswords.has(lowered)) {
    throw apiError(Code.InvalidArgument, 'weak_password', 'This password is too common; choose another one.', { field });
  }
}

export interface PasswordCheck {
  ok: boolean;
  /** The stored hash uses other parameters than the current ones: store a fresh hash. */
  needsRehash: boolean;
}

const busy = () => retryLater('service_unavailable', 'Too many passwords are being checked right now; try again in a moment.', 1, Code.Unavailable);
const expired = () => apiError(Code.DeadlineExceeded, 'deadline_exceeded', 'The request ran out of time before its password could be checked.');

/** A bounded queue in front of `limit` slots; work whose request ended meanwhile never starts. */
class Semaphore {
  /** How many computations started: tests see from it that expired work never ran. */
  started = 0;
  /** Computations running now (at most `limit`). */
  active = 0;
  private readonly waiting: Array<{ start: () => void }> = [];

  /** Computations waiting for a slot (at most `queueLimit`). */
  get queued(): number {
    return this.waiting.length;
  }

  constructor(
    private readonly limit: number,
    private readonly queueLimit: number,
  ) {}

  async run<T>(work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) throw expired();
    if (this.active >= this.limit) {
      if (this.waiting.length >= this.queueLimit) throw busy();
      await new Promise<void>((resolve, reject) => {
        const entry = {
          start: () => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          },
        };
        // A request that ends while it waits leaves the queue at once (its slot goes to the next).
        const onAbort = () => {
          this.waiting.splice(this.waiting.indexOf(entry), 1);
          reject(expired());
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        this.waiting.push(entry);
      });
    } else this.active++;
    try {
      if (signal?.aborted) throw expired();
      this.started++;
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next.start();
      else this.active--;
    }
  }
}

/**
 * Hashes and verifies with argon2id behind a bounded queue. The caller's signal is honoured: a
 * request that is over (deadline passed, client gone) by the time its turn comes is never hashed.
 */
export class PasswordHasher {
  private dummyHash: Promise<string> | undefined;
  private readonly slots: Semaphore;

  /** `concurrency` argon2 computations at once, `queueLimit` more waiting (ARGON2_CONCURRENCY, ARGON2_QUEUE_LIMIT: config.ts). */
  constructor(concurrency: number, queueLimit: number) {
    this.slots = new Semaphore(concurrency, queueLimit);
  }

  /** argon2 computations started so far. */
  get computations(): number {
    return this.slots.started;
  }

  /** The queue now: computations running and waiting for a slot. */
  get load(): { running: number; queued: number } {
    return { running: this.slots.active, queued: this.slots.queued };
  }

  /** Computes the dummy hash (same cost as real ones) so the first unknown-email login is not faster. */
  prepare(): Promise<string> {
    this.dummyHash ??= this.hash(randomBytes(32).toString('base64url')).catch((err) => {
      this.dummyHash = undefined;
      throw err;
    });
    return this.dummyHash;
  }

  /** `signal`: the call's; once it aborts, the hash is not computed (or waited for). */
  hash(password: string, signal?: AbortSignal): Promise<string> {
    return this.slots.run(() => argon2.hash(password, { type: argon2.argon2id, ...argon2Parameters }), signal);
  }

  async verify(hash: string, password: string, signal?: AbortSignal): Promise<PasswordCheck> {
    let ok: boolean;
    try {
      ok = await this.slots.run(() => argon2.verify(hash, password), signal);
    } catch (err) {
      if (err instanceof ConnectError) throw err;
      // A malformed stored hash never lets anyone in.
      return { ok: false, needsRehash: false };
    }
    return { ok, needsRehash: ok && argon2.needsRehash(hash, argon2Parameters) };
  }

  /** Spends the time of a real verification for an account that does not exist; always false. */
  async verifyDummy(password: string, signal?: AbortSignal): Promise<false> {
    await this.verify(await this.prepare(), password, signal);
    return false;
  }
}
