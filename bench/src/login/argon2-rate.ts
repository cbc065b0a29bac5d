import argon2 from 'argon2';
import { closedLoop } from '../measure/loop.js';

/** The parameters identity uses (services/identity/src/passwords.ts). */
export const argon2Parameters = { type: argon2.argon2id, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;

/** argon2id verifications per second in this process, `concurrency` at a time (libuv's 4 threads, like identity). */
export async function rawVerifyRate(durationMs: number, concurrency: number): Promise<number> {
  const hash = await argon2.hash('bench password for the raw rate', argon2Parameters);
  let done = 0;
  const seconds = await closedLoop(concurrency, { maxCalls: Number.POSITIVE_INFINITY, seconds: durationMs / 1000 }, async () => {
    await argon2.verify(hash, 'bench password for the raw rate');
    done++;
  });
  return done / seconds;
}
