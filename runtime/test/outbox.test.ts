import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import { AgentCompletedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EventConsumer, type EventEnvelopeJson, startConsumer } from '../src/consumer.js';
import { createDb, type Knex } from '../src/db.js';
import { startNatsServer } from '../src/infra.js';
import { createLogger } from '../src/log.js';
import { connectNats, ensureEventStream, type NatsConnection } from '../src/nats.js';
import { createOutboxTables, type OutboxRelay, recordEvent, startOutboxRelay } from '../src/outbox.js';
import { eventually as waitFor } from '../src/testing.js';

const log = createLogger('outbox-test', process.env.LOG_LEVEL ?? 'silent');
const runId = randomBytes(4).toString('hex');
const schema = `outbox_test_${runId}`;
const stream = `OUTBOX_TEST_${runId}`;
const subjectPrefix = `outboxtest.${runId}`;
const durable = `outbox_test_${runId}`;

type NatsServer = Awaited<ReturnType<typeof startNatsServer>>;
let storeDir: string;
let server: NatsServer;
let nc: NatsConnection;
let jsm: JetStreamManager;
let db: Knex;
let relay: OutboxRelay;
let consumer: EventConsumer;
/** Handler runs per event id (the consumer's exactly-once view). */
const handled = new Map<string, number>();
const received: EventEnvelopeJson[] = [];

/** The subject of the events committed under `label`. */
const subjectOf = (label: string) => `${subjectPrefix}.${label}.agent.completed`;

/** Commits an event of free-form data (agent.completed), on a subject of its own per label. */
function commitEvent(label: string, data: Record<string, string> = {}): Promise<string> {
  return db.transaction((trx) =>
    recordEvent(
      trx,
      AgentCompletedSchema,
      { workspaceId: 'ws_test', data, requestId: 'req_test' },
      { producer: 'outbox-test', subjectPrefix: `${subjectPrefix}.${label}` },
    ),
  );
}

/** How many messages the stream holds on `subject`. */
async function storedOn(subject: string): Promise<number> {
  const info = await jsm.streams.info(stream, { subjects_filter: subject });
  return info.state.subjects?.[subject] ?? 0;
}

beforeAll(async () => {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) throw new Error('DATABASE_URL is not set (global setup)');
  storeDir = await mkdtemp(path.join(tmpdir(), 'sb-outbox-nats-'));
  server = await startNatsServer(storeDir);
  nc = await connectNats(server.url, 'outbox-test', log);
  jsm = await jetstreamManager(nc);
  await ensureEventStream(nc, stream, subjectPrefix);

  db = createDb(databaseUrl, schema, 5);
  await db.raw('CREATE SCHEMA ??', [schema]);
  await createOutboxTables(db);

  relay = startOutboxRelay({ db, schema, nats: nc, log, publishTimeoutMs: 500 });
  consumer = startConsumer({
    db,
    nats: nc,
    stream,
    durable,
    filterSubjects: [`${subjectPrefix}.>`],
    log,
    handle: async (event) => {
      handled.set(event.event_id, (handled.get(event.event_id) ?? 0) + 1);
      received.push(event);
    },
  });
});

afterAll(async () => {
  await consumer?.stop();
  await relay?.stop();
  await jsm?.streams.delete(stream).catch(() => false);
  await nc?.close().catch(() => undefined);
  await server?.stop?.();
  if (storeDir) await rm(storeDir, { recursive: true, force: true });
  await db?.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  await db?.destroy();
});

describe('outbox relay', () => {
  it('sets Nats-Msg-Id to the event id and publishes the proto JSON envelope', async () => {
    const eventId = await commitEvent('header', { hello: 'world' });
    await waitFor(() => handled.get(eventId), 'the event to be consumed');

    const stored = await jsm.streams.getMessage(stream, { last_by_subj: subjectOf('header') });
    expect(stored?.header.get('Nats-Msg-Id')).toBe(eventId);
    const payload = JSON.parse(new TextDecoder().decode(stored!.data));
    expect(payload).toMatchObject({
      event_id: eventId,
      type: 'agent.completed',
      workspace_id: 'ws_test',
      data: { hello: 'world' },
      producer: 'outbox-test',
      request_id: 'req_test',
    });
    expect(payload.occurred_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);

    const row = await db('outbox').where({ event_id: eventId }).first();
    expect(row.published_at).not.toBeNull();
    expect(row.subject).toBe(subjectOf('header'));
    expect(received.find((event) => event.event_id === eventId)).toMatchObject({ type: 'agent.completed', data: { hello: 'world' } });
  });

  it('publishes nothing for a rolled-back transaction', async () => {
    let rolledBackId = '';
    await expect(
      db.transaction(async (trx) => {
        rolledBackId = await recordEvent(trx, AgentCompletedSchema, { data: {} }, { producer: 'outbox-test', subjectPrefix: `${subjectPrefix}.rolledback` });
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(rolledBackId).toMatch(/^evt_/);
    expect(await db('outbox').where({ event_id: rolledBackId }).first()).toBeUndefined();

    // Barrier: a later committed event goes through the same relay and consumer.
    const laterId = await commitEvent('committed');
    await waitFor(() => handled.get(laterId), 'the committed event');
    expect(handled.has(rolledBackId)).toBe(false);
    expect(await storedOn(subjectOf('rolledback'))).toBe(0);
  });

  it('refuses an event too large for NATS with its transaction, so it can never block the outbox', async () => {
    const big = { blob: 'x'.repeat(300 * 1024) };
    await expect(commitEvent('too_big', big)).rejects.toThrow(/at most/);
    expect(
      await db('outbox')
        .where({ subject: subjectOf('too_big') })
        .first(),
    ).toBeUndefined();
  });

  it('keeps an event committed while NATS is down and publishes it once NATS is back', async () => {
    const port = server.port;
    await server.stop!();

    const eventId = await commitEvent('outage', { during: 'outage' });
    // The relay tried (and failed) while NATS was down; the row is kept.
    const failed = await waitFor(async () => {
      const row = await db('outbox').where({ event_id: eventId }).first();
      return row && row.attempts >= 1 && row.last_error ? row : undefined;
    }, 'a failed publish attempt');
    expect(failed.published_at).toBeNull();
    expect(handled.has(eventId)).toBe(false);

    server = await startNatsServer(storeDir, port);
    await waitFor(() => handled.get(eventId), 'the event after NATS restarted', 20_000);

    // Barrier: an event committed after it is consumed in order behind it (one stream, one consumer).
    const barrierId = await commitEvent('after-outage');
    await waitFor(() => handled.get(barrierId), 'the barrier event');

    expect(handled.get(eventId)).toBe(1);
    expect(await storedOn(subjectOf('outage'))).toBe(1);
    const processed = await db('processed_events').where({ consumer: durable, event_id: eventId });
    expect(processed).toHaveLength(1);
    const row = await db('outbox').where({ event_id: eventId }).first();
    expect(row.published_at).not.toBeNull();
  });
});
