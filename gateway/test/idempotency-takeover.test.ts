import { randomUUID } from 'node:crypto';
import { Kvm } from '@nats-io/kv';
import { createLogger } from '@switchboard/runtime/log';
import { connectNats } from '@switchboard/runtime/nats';
import { requireEnv } from '@switchboard/runtime/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { type Answer, IdempotencyStore } from '../src/idempotency.js';

/**
 * Two gateway replicas' Idempotency-Key stores on one real NATS (docs/conventions.md#idempotency):
 * a claim whose replica died mid-call is taken over after the takeover delay, once, and the
 * dead replica's late answer does not replace the one kept. The call is a stand-in: what is
 * tested is the store between replicas, which a single-gateway mesh cannot show.
 */
const log = createLogger('test', 'silent');
const nats = connectNats(requireEnv('NATS_URL'), 'idempotency-takeover-test', log);
const bucket = `test-${randomUUID().slice(0, 8)}-idempotency`;
afterAll(async () => {
  const nc = await nats;
  await (await new Kvm(nc).open(bucket)).destroy();
  await nc.close();
});
async function replica(): Promise<IdempotencyStore> {
  await nats;
  const store = new IdempotencyStore({ nats, bucket, secret: 'an idempotency secret of at least thirty-two bytes', log, takeoverAfterMs: 500 });
  // The store learns of the connection in a callback of the promise: let it run.
  await new Promise((resolve) => setImmediate(resolve));
  return store;
}

const answer = (text: string): Answer => ({
  status: 201,
  headers: { 'Content-Type': 'application/json; charset=utf-8' },
  body: Buffer.from(JSON.stringify({ text })),
});
const request = (key: string) => ({
  key,
  scope: 'user:usr_takeover org_takeover',
  route: 'POST /v1/keys',
  path: '/v1/keys',
  query: '',
  body: Buffer.from('{}'),
  requestId: 'req_takeover',
});

describe('Idempotency-Key between replicas', () => {
  it('takes over the claim of a replica that died mid-call, once, after the delay', async () => {
    const [dead, first, second] = [await replica(), await replica(), await replica()];
    const key = randomUUID();
    let finishDeadCall!: (value: Answer) => void;
    let deadCallStarted!: () => void;
    const started = new Promise<void>((resolve) => {
      deadCallStarted = resolve;
    });
    const deadRun = dead.run(
      request(key),
      () => {
        deadCallStarted();
        return new Promise<Answer>((resolve) => {
          finishDeadCall = resolve;
        });
      },
      new AbortController().signal,
    );
    await started;
    let runs = 0;
    const call = async () => {
      runs += 1;
      return answer('the second run');
    };
    const waitedFrom = Date.now();
    const [a, b] = await Promise.all([
      first.run(request(key), call, new AbortController().signal),
      second.run(request(key), call, new AbortController().signal),
    ]);
    expect(Date.now() - waitedFrom).toBeGreaterThanOrEqual(400);
    expect(runs).toBe(1);
    expect([a.replayed, b.replayed].sort()).toEqual([false, true]);
    expect(a.answer.body.toString()).toBe(b.answer.body.toString());

    // The dead replica's call ends after all: its client gets its answer, the kept one stays.
    finishDeadCall(answer('the dead run'));
    expect((await deadRun).answer.body.toString()).toContain('the dead run');
    const later = await first.run(request(key), call, new AbortController().signal);
    expect(later.replayed).toBe(true);
    expect(later.answer.body.toString()).toContain('the second run');
    expect(runs).toBe(1);
  });
});
