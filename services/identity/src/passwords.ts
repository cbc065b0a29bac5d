import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { Code } from '@connectrpc/connect';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import argon2 from 'argon2';
import { commonPasswords } from './common-passwords.js';

/**
 * Password policy and hashing (SPEC §3): argon2id with OWASP's m=19456 KiB, t=2, p=1; the
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

/**
 * At most this many argon2 computations run at once (ARGON2_CONCURRENCY; default: the number of
 * cores). argon2 runs on libuv's threads, never on the event loop, but more hashes than cores
 * only add CPU contention for the event loop's thread (and occupy libuv threads that file and
 * DNS work also need); sign-ins beyond the limit queue instead. `npm run bench:login` measures it.
 */
export function defaultArgon2Concurrency(): number {
  const configured = Number(process.env.ARGON2_CONCURRENCY);
  if (Number.isInteger(configured) && configured > 0) return configured;
  return Math.max(1, os.availableParallelism());
}

class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active++;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}

export class PasswordHasher {
  private dummyHash: Promise<string> | undefined;
  private readonly slots: Semaphore;

  constructor(concurrency = defaultArgon2Concurrency()) {
    this.slots = new Semaphore(concurrency);
  }

  /** Computes the dummy hash (same cost as real ones) so the first unknown-email login is not faster. */
  prepare(): Promise<string> {
    this.dummyHash ??= this.hash(randomBytes(32).toString('base64url')).catch((err) => {
      this.dummyHash = undefined;
      throw err;
    });
    return this.dummyHash;
  }

  hash(password: string): Promise<string> {
    return this.slots.run(() => argon2.hash(password, { type: argon2.argon2id, ...argon2Parameters }));
  }

  async verify(hash: string, password: string): Promise<PasswordCheck> {
    let ok: boolean;
    try {
      ok = await this.slots.run(() => argon2.verify(hash, password));
    } catch {
      // A malformed stored hash never lets anyone in.
      return { ok: false, needsRehash: false };
    }
    return { ok, needsRehash: ok && argon2.needsRehash(hash, argon2Parameters) };
  }

  /** Spends the time of a real verification for an account that does not exist; always false. */
  async verifyDummy(password: string): Promise<false> {
    await this.verify(await this.prepare(), password);
    return false;
  }
}
