import { Code, ConnectError } from '@connectrpc/connect';
import { AuthService } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { PasswordHasher } from '@switchboard/identity/passwords';
import { createDb } from '@switchboard/runtime/db';
import { outcomeOf } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meshClient, type RunningIdentity, requireEnv, startIdentity, uniqueEmail } from './helpers.js';

const codeOf = (err: unknown) => ConnectError.from(err).code;

/** The argon2 queue (ASVS 2.x, availability): bounded, and blind to requests already over. */
describe('PasswordHasher', () => {
  it('fails fast with 503 past its queue, and runs only what it admitted', async () => {
    const hasher = new PasswordHasher(1, 2);
    const outcomes = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => hasher.hash(`password number ${i}`)));
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    // One runs, two wait, the other three are refused at once.
    expect(refused).toHaveLength(3);
    for (const { reason } of refused) {
      expect(codeOf(reason)).toBe(Code.Unavailable);
      expect(ConnectError.from(reason).metadata.get('retry-after')).toBe('1');
    }
    expect(hasher.computations).toBe(3);
  });

  it('never hashes for a request whose deadline passed, before or while it waited', async () => {
    const hasher = new PasswordHasher(1, 10);
    await expect(hasher.hash('already too late', AbortSignal.abort())).rejects.toSatisfy((err) => codeOf(err) === Code.DeadlineExceeded);
    expect(hasher.computations).toBe(0);
    const running = hasher.hash('holds the only slot');
    const waiting = new AbortController();
    const queued = hasher.verify('$argon2id$v=19$m=19456,t=2,p=1$x$y', 'x', waiting.signal);
    waiting.abort();
    await expect(queued).rejects.toSatisfy((err) => codeOf(err) === Code.DeadlineExceeded);
    await running;
    expect(hasher.computations).toBe(1);
    // The slot was handed on properly: the next hash runs.
    await hasher.hash('after the expired one');
    expect(hasher.computations).toBe(2);
  });
});

describe('sign-in storm on identity', () => {
  let service: RunningIdentity;
  // One account each, so the per-account sign-in throttle (5) is not what answers.
  const emails = Array.from({ length: 20 }, () => uniqueEmail('storm'));
  const password = 'correct horse battery staple';

  beforeAll(async () => {
    service = await startIdentity({ env: { ARGON2_CONCURRENCY: '1', ARGON2_QUEUE_LIMIT: '0' } });
    for (const email of emails) await meshClient(AuthService, service.baseUrl).register({ email, password });
  });
  afterAll(() => service?.stop());

  it('answers what it can and refuses the rest with 503 at once, never queueing without bound', async () => {
    const auth = meshClient(AuthService, service.baseUrl);
    const outcomes = await Promise.all(emails.map((email) => outcomeOf(auth.login({ email, password }))));
    expect(outcomes.filter((o) => o === 'ok').length).toBeGreaterThanOrEqual(1);
    expect(outcomes.filter((o) => o === 'Unavailable').length).toBeGreaterThanOrEqual(1);
    expect(outcomes.every((o) => o === 'ok' || o === 'Unavailable')).toBe(true);
    // A refusal is no failed attempt: an account refused 5 times over can still sign in.
    const refusedEmail = emails[outcomes.indexOf('Unavailable')];
    const db = createDb(requireEnv('DATABASE_URL'), 'identity', 1);
    try {
      expect(await db('auth_failures').where({ kind: 'password', scope: 'account', subject: refusedEmail }).count('* as n').first()).toEqual({ n: 0 });
    } finally {
      await db.destroy();
    }
    expect(await outcomeOf(auth.login({ email: refusedEmail, password }))).toBe('ok');
  });
});
