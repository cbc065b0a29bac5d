import { randomUUID } from 'node:crypto';
import { Kvm } from '@nats-io/kv';
import { ApiError } from '@switchboard/runtime/api-error';
import { createLogger } from '@switchboard/runtime/log';
import { connectNats } from '@switchboard/runtime/nats';
import { requireEnv } from '@switchboard/runtime/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { type Answer, IdempotencyStore, takeoverDelayOf } from '../src/idempotency.js';

/**
 * Two gateway replicas' Idempotency-Key stores on one real NATS (docs/conventions.md#idempotency):
 * a claim whose replica died mid-call is taken over after the takeover delay, once, and the
 * dead replica's late answer does not replace the one kept; after a rotation of the idempotency
 * secret, an answer kept under the old one is a 409, never a second run. The call is a stand-in: what is
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
async function replica(secret = 'an idempotency secret of at least thirty-two bytes'): Promise<IdempotencyStore> {
  await nats;
  const store = new IdempotencyStore({ nats, bucket, secret, log, takeoverAfterMs: 500 });
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

  it('answers 409 idempotent_result_unavailable for an answer kept under another secret (a rotation), and runs nothing again', async () => {
    const before = await replica('the idempotency secret before the rotation, 32+ bytes');
    const after = await replica('the idempotency secret after the rotation, 32+ bytes');
    const key = randomUUID();
    let runs = 0;
    const call = async () => {
      runs += 1;
      return answer('the only run');
    };
    expect((await before.run(request(key), call, new AbortController().signal)).replayed).toBe(false);
    // The same request, and another one, with the key: neither is run, neither is a 422 or a 500.
    for (const retry of [request(key), { ...request(key), body: Buffer.from('{"name":"other"}') }]) {
      const refused = await after.run(retry, call, new AbortController().signal).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(ApiError);
      expect((refused as ApiError).status).toBe(409);
      expect((refused as ApiError).code).toBe('idempotent_result_unavailable');
      expect((refused as ApiError).message).toContain('can no longer be read');
    }
    expect(runs).toBe(1);
    // The replica still under the old secret replays it as before.
    const replayed = await before.run(request(key), call, new AbortController().signal);
    expect(replayed.replayed).toBe(true);
    expect(replayed.answer.body.toString()).toContain('the only run');
    expect(runs).toBe(1);
  });
});

describe('replays of kept errors', () => {
  it('name the request id of the retry, and a body that is not the error body is replayed as it was, never a 500', async () => {
    const store = await replica();
    const kept = async (body: string) => {
      const key = randomUUID();
      const refusal = async (): Promise<Answer> => ({ status: 409, headers: { 'Content-Type': 'application/json; charset=utf-8' }, body: Buffer.from(body) });
      await store.run(request(key), refusal, new AbortController().signal);
      const replay = await store.run({ ...request(key), requestId: 'req_retry' }, refusal, new AbortController().signal);
      expect(replay.replayed).toBe(true);
      return replay.answer.body.toString();
    };
    expect(JSON.parse(await kept('{"error":{"code":"key_revoked","request_id":"req_takeover"}}'))).toEqual({
      error: { code: 'key_revoked', request_id: 'req_retry' },
    });
    for (const body of ['not JSON', '', 'null', '{"error":"text"}', '[1]']) expect(await kept(body)).toBe(body);
  });

  it('wait for a claim the call deadline and a margin: the 10 s deadline is a 15 s takeover', () => {
    expect(takeoverDelayOf(10_000)).toBe(15_000);
  });
});
