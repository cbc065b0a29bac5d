import { randomBytes } from 'node:crypto';
import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { KeyUpdatedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  consumeEvents,
  type EventEnvelopeJson,
  onEvent,
  onEventBatch,
  onEventPassedThrough,
  type PassedThroughEvent,
  type ReceivedEvent,
  startConsumer,
} from '../src/consumer.js';
import { createDb, type Knex } from '../src/db.js';
import { eventDataToJson } from '../src/event-data.js';
import { newId } from '../src/ids.js';
import { createLogger } from '../src/log.js';
import { connectNats, ensureEventStream, type NatsConnection } from '../src/nats.js';
import { buildEventPayload, createOutboxTables } from '../src/outbox.js';
import { eventually as waitFor } from '../src/testing.js';

const log = createLogger('consumer-test', process.env.LOG_LEVEL ?? 'silent');
const runId = randomBytes(4).toString('hex');
const schema = `consumer_test_${runId}`;
let stream: string;
let prefix: string;
let nc: NatsConnection;
let js: JetStreamClient;
let jsm: JetStreamManager;
let db: Knex;
const durables: string[] = [];

beforeAll(async () => {
  const databaseUrl = process.env.DATABASE_URL;
  const natsUrl = process.env.NATS_URL;
  stream = process.env.EVENTS_STREAM ?? '';
  const streamPrefix = process.env.EVENTS_SUBJECT_PREFIX ?? '';
  if (!databaseUrl || !natsUrl || !stream || !streamPrefix) throw new Error('test environment not set (global setup)');
  prefix = `${streamPrefix}.ctest_${runId}`;
  nc = await connectNats(natsUrl, 'consumer-test', log);
  await ensureEventStream(nc, stream, streamPrefix);
  js = jetstream(nc);
  jsm = await jetstreamManager(nc);

  db = createDb(databaseUrl, schema, 5);
  await db.raw('CREATE SCHEMA ??', [schema]);
  await createOutboxTables(db);
  await db.schema.createTable('effects', (table) => {
    table.text('event_id').notNullable();
  });
});

afterAll(async () => {
  for (const durable of durables) await jsm?.consumers.delete(stream, durable).catch(() => false);
  await nc?.close().catch(() => undefined);
  await db?.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  await db?.destroy();
});

/** An envelope on `<prefix>.<group>.<type>`, as the outbox relay would publish it. */
function envelope(group: string, type = 'thing.happened') {
  const eventId = newId('evt');
  const fullType = `ctest_${runId}.${group}.${type}`;
  const body = JSON.stringify(buildEventPayload(eventId, { type: fullType, data: { n: 1 } }, 'consumer-test'));
  return { eventId, subject: `${prefix}.${group}.${type}`, body };
}

/** Starts a consumer on `<prefix>.<group>.>` that counts handler runs per event id. */
function consume(group: string, handle: (event: EventEnvelopeJson, trx: Knex.Transaction) => Promise<void>, concurrency?: number) {
  const durable = `ctest_${runId}_${group}`;
  durables.push(durable);
  const consumer = startConsumer({ db, nats: nc, stream, durable, filterSubjects: [`${prefix}.${group}.>`], log, handle, concurrency });
  return { durable, consumer };
}

async function processedRows(durable: string, eventId: string): Promise<number> {
  const rows = await db('processed_events').where({ consumer: durable, event_id: eventId });
  return rows.length;
}

describe('event consumer', () => {
  it('handles up to `concurrency` events at once, each exactly once', async () => {
    let running = 0;
    let most = 0;
    const calls = new Map<string, number>();
    const { consumer } = consume(
      'parallel',
      async (event, trx) => {
        running += 1;
        most = Math.max(most, running);
        await trx.raw('SELECT pg_sleep(0.02)');
        calls.set(event.event_id, (calls.get(event.event_id) ?? 0) + 1);
        running -= 1;
      },
      4,
    );
    try {
      const events = Array.from({ length: 40 }, () => envelope('parallel'));
      await Promise.all(events.map((event) => js.publish(event.subject, event.body, { msgID: event.eventId })));
      await waitFor(() => calls.size === 40, 'every event handled');
      expect([...calls.values()].every((count) => count === 1)).toBe(true);
      expect(most).toBeGreaterThan(1);
      expect(most).toBeLessThanOrEqual(4);
    } finally {
      await consumer.stop();
    }
  });

  it('handles an event published twice under different msg ids once', async () => {
    const calls = new Map<string, number>();
    const { durable, consumer } = consume('dup', async (event) => {
      calls.set(event.event_id, (calls.get(event.event_id) ?? 0) + 1);
    });
    try {
      const event = envelope('dup');
      const first = await js.publish(event.subject, event.body, { msgID: `${event.eventId}-a` });
      const second = await js.publish(event.subject, event.body, { msgID: `${event.eventId}-b` });
      expect(second.duplicate).toBe(false);
      expect(second.seq).toBeGreaterThan(first.seq);

      // Barrier: a later event on the same consumer is handled after both copies.
      const barrier = envelope('dup');
      await js.publish(barrier.subject, barrier.body, { msgID: barrier.eventId });
      await waitFor(() => calls.get(barrier.eventId), 'the barrier event');
      await waitFor(async () => (await jsm.consumers.info(stream, durable)).num_ack_pending === 0, 'all messages acked');

      expect(calls.get(event.eventId)).toBe(1);
      expect(await processedRows(durable, event.eventId)).toBe(1);
      const info = await jsm.consumers.info(stream, durable);
      expect(info.delivered.stream_seq).toBeGreaterThanOrEqual(second.seq);
    } finally {
      await consumer.stop();
    }
  });

  it('retries a handler that throws and commits its work exactly once', async () => {
    let calls = 0;
    const { durable, consumer } = consume('retry', async (event, trx) => {
      calls++;
      await trx('effects').insert({ event_id: event.event_id });
      if (calls === 1) throw new Error('transient failure');
    });
    try {
      const event = envelope('retry');
      await js.publish(event.subject, event.body, { msgID: event.eventId });
      await waitFor(async () => (await processedRows(durable, event.eventId)) === 1, 'the event to be processed');
      await waitFor(async () => (await jsm.consumers.info(stream, durable)).num_ack_pending === 0, 'the message to be acked');

      expect(calls).toBe(2);
      const effects = await db('effects').where({ event_id: event.eventId });
      expect(effects).toHaveLength(1); // the failed attempt's insert was rolled back
    } finally {
      await consumer.stop();
    }
  });

  it('terminates malformed messages without blocking the following ones', async () => {
    const seen: EventEnvelopeJson[] = [];
    const { durable, consumer } = consume('malformed', async (event) => {
      seen.push(event);
    });
    try {
      await js.publish(`${prefix}.malformed.bad`, 'not json {', { msgID: newId('bad') });
      await js.publish(`${prefix}.malformed.bad`, JSON.stringify({ type: 'x.y', data: {} }), { msgID: newId('bad') }); // no event_id
      await js.publish(`${prefix}.malformed.bad`, JSON.stringify({ event_id: 'evt_x', type: 'x.y', data: 'oops' }), { msgID: newId('bad') });
      const good = envelope('malformed');
      await js.publish(good.subject, good.body, { msgID: good.eventId });

      await waitFor(() => seen.some((event) => event.event_id === good.eventId), 'the valid event');
      await waitFor(async () => (await jsm.consumers.info(stream, durable)).num_ack_pending === 0, 'nothing left pending');

      expect(seen.map((event) => event.event_id)).toEqual([good.eventId]);
      expect(seen[0]).toMatchObject({ workspace_id: '', request_id: '', producer: 'consumer-test', data: { n: 1 } });
      const info = await jsm.consumers.info(stream, durable);
      expect(info.num_redelivered).toBe(0);
      expect(info.num_pending).toBe(0);
      expect(await processedRows(durable, good.eventId)).toBe(1);
    } finally {
      await consumer.stop();
    }
  });

  it('hands a typed consumer the decoded payload and terminates data that does not fit it', async () => {
    const seen: ReceivedEvent<typeof KeyUpdatedSchema>[] = [];
    const host = { name: `ctest_${runId}`, db, nats: nc, log, config: { eventsStream: stream, eventsSubjectPrefix: `${prefix}.typed` } };
    const durable = `ctest_${runId}-key-updated`;
    durables.push(durable);
    const [consumer] = consumeEvents(host, [
      onEvent(KeyUpdatedSchema, async (event) => {
        seen.push(event);
      }),
    ]);
    try {
      const subject = `${prefix}.typed.key.updated`;
      const publish = async (data: Record<string, unknown>) => {
        const eventId = newId('evt');
        const body = JSON.stringify(buildEventPayload(eventId, { type: 'key.updated', data: data as EventEnvelopeJson['data'] }, 'consumer-test'));
        await js.publish(subject, body, { msgID: eventId });
        return eventId;
      };
      await publish({ key_id: 5, change: 'name' }); // a number where the message has a string
      const good = await publish(eventDataToJson(KeyUpdatedSchema, { keyId: 'key_1', workspaceId: 'org_1', change: 'name' }));

      await waitFor(() => seen.some((event) => event.event_id === good), 'the valid event');
      await waitFor(async () => (await jsm.consumers.info(stream, durable)).num_ack_pending === 0, 'nothing left pending');
      expect(seen.map((event) => [event.event_id, event.data.keyId, event.data.change])).toEqual([[good, 'key_1', 'name']]);
      const info = await jsm.consumers.info(stream, durable);
      expect(info.num_redelivered).toBe(0);
      expect(info.num_pending).toBe(0);
    } finally {
      await consumer.stop();
    }
  });

  it('hands a passing-through consumer the data as it arrived, even data the typed message would refuse', async () => {
    const seen: PassedThroughEvent[] = [];
    const host = { name: `ptest_${runId}`, db, nats: nc, log, config: { eventsStream: stream, eventsSubjectPrefix: `${prefix}.passed` } };
    const durable = `ptest_${runId}-key-updated`;
    durables.push(durable);
    const [consumer] = consumeEvents(host, [
      onEventPassedThrough(KeyUpdatedSchema, async (events) => {
        seen.push(...events);
      }),
    ]);
    try {
      const eventId = newId('evt');
      const data = { key_id: 5, change: 'name', added_later: true }; // a number where the message has a string
      const body = JSON.stringify(buildEventPayload(eventId, { type: 'key.updated', data }, 'consumer-test'));
      await js.publish(`${prefix}.passed.key.updated`, body, { msgID: eventId });

      await waitFor(() => seen.length === 1, 'the event');
      expect(seen[0].event_id).toBe(eventId);
      expect(seen[0].json).toEqual(data);
    } finally {
      await consumer.stop();
    }
  });

  describe('in batches', () => {
    /** A typed batch consumer of `key.updated` under its own prefix; `stop` it before publishing to build a backlog. */
    function batchConsumer(
      group: string,
      handle: (events: ReceivedEvent<typeof KeyUpdatedSchema>[], trx: Knex.Transaction) => Promise<void>,
      maxBatch?: number,
    ) {
      const host = { name: `btest_${runId}_${group}`, db, nats: nc, log, config: { eventsStream: stream, eventsSubjectPrefix: `${prefix}.${group}` } };
      const durable = `btest_${runId}_${group}-key-updated`;
      durables.push(durable);
      const start = () => consumeEvents(host, [onEventBatch(KeyUpdatedSchema, handle, { maxBatch })])[0];
      const publish = async (eventId = newId('evt'), msgId = eventId) => {
        const data = eventDataToJson(KeyUpdatedSchema, { keyId: 'key_1', workspaceId: 'org_1', change: 'name' });
        await js.publish(`${prefix}.${group}.key.updated`, JSON.stringify(buildEventPayload(eventId, { type: 'key.updated', data }, 'consumer-test')), {
          msgID: msgId,
        });
        return eventId;
      };
      return { durable, start, publish };
    }

    /** Starts the durable once and stops it, so what is published next waits as a backlog. */
    async function createDurable(consumer: { start: () => { stop(): Promise<void> }; durable: string }) {
      const running = consumer.start();
      await waitFor(() => jsm.consumers.info(stream, consumer.durable), 'the durable consumer');
      await running.stop();
    }

    it('handles a backlog in batches of at most maxBatch, each batch one transaction', async () => {
      const batches: string[][] = [];
      const consumer = batchConsumer(
        'backlog',
        async (events, trx) => {
          // The batch's processed_events rows were written by this very transaction.
          const { rows } = await trx.raw<{ rows: Array<{ count: string }> }>(
            `SELECT count(*) FROM processed_events WHERE consumer = ? AND event_id = ANY(?) AND xmin::text = (txid_current() % 4294967296)::text`,
            [consumer.durable, events.map((event) => event.event_id)],
          );
          expect(Number(rows[0].count)).toBe(events.length);
          batches.push(events.map((event) => event.event_id));
        },
        20,
      );
      await createDurable(consumer);
      const published: string[] = [];
      for (let i = 0; i < 50; i++) published.push(await consumer.publish());
      const running = consumer.start();
      try {
        await waitFor(() => batches.flat().length === 50, 'every event handled');
        expect(batches.flat().sort()).toEqual([...published].sort());
        expect(Math.max(...batches.map((batch) => batch.length))).toBeLessThanOrEqual(20);
        expect(batches.length).toBeLessThan(50);
      } finally {
        await running.stop();
      }
    });

    it('hands a batch only the events not processed before, each once', async () => {
      const handled: string[] = [];
      const consumer = batchConsumer('redelivered', async (events) => {
        handled.push(...events.map((event) => event.event_id));
      });
      let running = consumer.start();
      const first = await consumer.publish();
      await waitFor(() => handled.includes(first), 'the first event');
      await running.stop();
      // A backlog of the processed event again, a new one, and a new one twice (two message ids).
      await consumer.publish(first, `${first}-again`);
      const second = await consumer.publish();
      const third = await consumer.publish();
      await consumer.publish(third, `${third}-again`);
      running = consumer.start();
      try {
        await waitFor(async () => (await jsm.consumers.info(stream, consumer.durable)).num_pending === 0 && handled.includes(third), 'the backlog');
        await waitFor(async () => (await jsm.consumers.info(stream, consumer.durable)).num_ack_pending === 0, 'all messages acked');
        expect(handled.sort()).toEqual([first, second, third].sort());
      } finally {
        await running.stop();
      }
    });

    it('retries a failing batch whole, its work committed once', async () => {
      let calls = 0;
      const consumer = batchConsumer('failing', async (events, trx) => {
        calls++;
        await trx('effects').insert(events.map((event) => ({ event_id: event.event_id })));
        if (calls === 1) throw new Error('transient failure');
      });
      await createDurable(consumer);
      const published = [await consumer.publish(), await consumer.publish(), await consumer.publish()];
      const running = consumer.start();
      try {
        await waitFor(
          async () => (await db('processed_events').where({ consumer: consumer.durable }).whereIn('event_id', published)).length === 3,
          'the events processed',
        );
        await waitFor(async () => (await jsm.consumers.info(stream, consumer.durable)).num_ack_pending === 0, 'all messages acked');
        const effects = await db('effects').whereIn('event_id', published);
        expect(effects.map((row) => row.event_id).sort()).toEqual([...published].sort()); // the failed attempt's inserts were rolled back
        expect(calls).toBeGreaterThanOrEqual(2);
      } finally {
        await running.stop();
      }
    });
  });
});
