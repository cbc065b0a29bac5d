import { randomBytes } from 'node:crypto';
import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Knex } from '../src/db.js';
import { newId } from '../src/ids.js';
import { createLogger } from '../src/log.js';
import { connectNats, type NatsConnection, workSubjects } from '../src/nats.js';
import { eventually as waitFor } from '../src/testing.js';
import { consumeWork } from '../src/work-consumer.js';

const log = createLogger('work-consumer-test', process.env.LOG_LEVEL ?? 'silent');
const runId = randomBytes(4).toString('hex');
const schema = `work_consumer_test_${runId}`;
let config: { workStream: string; workSubjectPrefix: string };
let subject: string;
let nc: NatsConnection;
let js: JetStreamClient;
let jsm: JetStreamManager;
let db: Knex;
const durables: string[] = [];

beforeAll(async () => {
  const databaseUrl = process.env.DATABASE_URL;
  const natsUrl = process.env.NATS_URL;
  const workStream = process.env.WORK_STREAM;
  const workSubjectPrefix = process.env.WORK_SUBJECT_PREFIX;
  if (!databaseUrl || !natsUrl || !workStream || !workSubjectPrefix) throw new Error('test environment not set (global setup)');
  config = { workStream, workSubjectPrefix };
  subject = workSubjects(workSubjectPrefix).usage;
  nc = await connectNats(natsUrl, 'work-consumer-test', log);
  js = jetstream(nc);
  jsm = await jetstreamManager(nc);
  db = createDb(databaseUrl, schema, 5);
  await db.raw('CREATE SCHEMA ??', [schema]);
  // What a handler idempotent by its item's key writes: the key is the primary key.
  await db.raw('CREATE TABLE items (id text PRIMARY KEY, test text NOT NULL, txid bigint NOT NULL DEFAULT txid_current())');
});

afterAll(async () => {
  for (const durable of durables) await jsm?.consumers.delete(config.workStream, durable).catch(() => false);
  await nc?.close().catch(() => undefined);
  await db?.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  await db?.destroy();
});

interface Item {
  id: string;
  test: string;
}

/**
 * A work consumer of the usage subject, as billing's would be: it inserts its test's items ON
 * CONFLICT DO NOTHING. Every test's durable sees the whole subject, so each keeps only its own items.
 */
function consumer(test: string, options: { fail?: () => boolean; batches?: Item[][] } = {}) {
  const durable = `wtest_${runId}_${test}`;
  durables.push(durable);
  return consumeWork<Item>(
    { db, nats: nc, log, config },
    {
      durable,
      subject,
      decode: (msg) => {
        const item = msg.json<Item>();
        if (typeof item.id !== 'string' || typeof item.test !== 'string') throw new Error('not an item');
        return item;
      },
      async handle(items, trx) {
        const mine = items.filter((item) => item.test === test);
        if (mine.length === 0) return;
        await trx('items').insert(mine).onConflict('id').ignore();
        if (options.fail?.()) throw new Error('transient failure');
        options.batches?.push(mine);
      },
    },
  );
}

const publish = (item: Item, msgID = item.id) => js.publish(subject, JSON.stringify(item), { msgID });

describe('work consumer', () => {
  it('creates the work stream and handles each batch in one transaction', async () => {
    const batches: Item[][] = [];
    const running = consumer('batches', { batches });
    try {
      await waitFor(() => jsm.streams.info(config.workStream), 'the work stream');
      const items = Array.from({ length: 40 }, () => ({ id: newId('gen'), test: 'batches' }));
      await Promise.all(items.map((item) => publish(item)));
      await waitFor(() => batches.flat().length === 40, 'every item handled');
      const rows = await db('items').where({ test: 'batches' });
      expect(rows.map((row) => row.id).sort()).toEqual(items.map((item) => item.id).sort());
      for (const batch of batches) {
        const txids = new Set(rows.filter((row) => batch.some((item) => item.id === row.id)).map((row) => row.txid));
        expect(txids.size).toBe(1);
      }
    } finally {
      await running.stop();
    }
  });

  it('retries a failing batch, and an item that comes again is written once', async () => {
    let calls = 0;
    const running = consumer('retry', { fail: () => ++calls === 1 });
    try {
      await waitFor(() => jsm.streams.info(config.workStream), 'the work stream');
      const item = { id: newId('gen'), test: 'retry' };
      await publish(item);
      await publish(item, `${item.id}-again`); // the same item published again after the duplicate window
      await waitFor(() => calls >= 2, 'a retry');
      await waitFor(async () => (await jsm.consumers.info(config.workStream, `wtest_${runId}_retry`)).num_ack_pending === 0, 'all messages acked');
      expect(await db('items').where({ test: 'retry' })).toHaveLength(1);
    } finally {
      await running.stop();
    }
  });

  it('terminates a malformed message alone', async () => {
    const batches: Item[][] = [];
    const running = consumer('malformed', { batches });
    const durable = `wtest_${runId}_malformed`;
    try {
      await waitFor(() => jsm.streams.info(config.workStream), 'the work stream');
      await js.publish(subject, 'not json {', { msgID: newId('bad') });
      const good = { id: newId('gen'), test: 'malformed' };
      await publish(good);
      await waitFor(() => batches.flat().some((item) => item.id === good.id), 'the valid item');
      await waitFor(async () => (await jsm.consumers.info(config.workStream, durable)).num_ack_pending === 0, 'nothing left pending');
      const info = await jsm.consumers.info(config.workStream, durable);
      expect(info.num_redelivered).toBe(0);
      expect(info.num_pending).toBe(0);
    } finally {
      await running.stop();
    }
  });
});
