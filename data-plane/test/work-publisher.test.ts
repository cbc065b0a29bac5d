import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { WorkPublisher } from '@switchboard/data-plane/work-publisher';
import { createLogger } from '@switchboard/runtime/log';
import { connectNats, ensureWorkStream, type NatsConnection, workSubjects } from '@switchboard/runtime/nats';
import { eventually } from '@switchboard/runtime/testing';
import { PrivateNats } from '@switchboard/testkit/chaos/private-infra';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The data plane's way into JetStream (docs/money-path.md#usage), against a NATS server of its
 * own that the test stops: a record is acknowledged by the stream, or queued and retried until
 * it is; a repeated generation is stored once; and when the queue cannot promise places, a
 * request is told before it calls the upstream.
 */

const log = createLogger('data-plane', 'silent');
let dir: string;
let nats: PrivateNats;
let nc: NatsConnection;
const stream = 'WORK_PUBLISHER_TEST';
const subject = workSubjects('wptest').usage;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'work-publisher-'));
  nats = await PrivateNats.start(dir);
  nc = await connectNats(nats.url, 'work-publisher-test', log);
  await ensureWorkStream(nc, stream, 'wptest');
});

afterAll(async () => {
  await nc?.close();
  await nats?.down();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const stored = async () => (await (await jetstreamManager(nc)).streams.info(stream)).state.messages;
const record = (text: string) => new TextEncoder().encode(text);

describe('the work publisher', () => {
  it('stores each generation once, queues what JetStream cannot take while NATS is down, and keeps it when NATS is back', async () => {
    const publisher = new WorkPublisher({ log, js: jetstream(nc), maxQueued: 3, publishTimeoutMs: 300 });
    await publisher.publish(subject, record('a'), 'gen_a');
    await publisher.publish(subject, record('a again'), 'gen_a');
    expect(await stored()).toBe(1);

    await nats.kill();
    const held = publisher.hold(2);
    expect(held).toBeDefined();
    await publisher.publish(subject, record('b'), 'gen_b');
    await publisher.publish(subject, record('c'), 'gen_c');
    held!.release();
    expect(publisher.queued).toBe(2);
    // Two queued and two places asked for: more than the queue may hold, so the request is refused before its upstream call.
    expect(publisher.hold(2)).toBeUndefined();
    expect(publisher.hold(1)).toBeDefined();

    await nats.up();
    await eventually(() => publisher.queued === 0, 'the queue to drain into JetStream');
    await eventually(async () => (await stored()) === 3, 'the queued records in the stream');
  });
});
