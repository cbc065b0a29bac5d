import { create, type DescMessage, type JsonObject, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { type JetStreamClient, jetstream } from '@nats-io/jetstream';
import { headers, type MsgHdrs } from '@nats-io/transport-node';
import { EventSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { afterCommit, type Knex } from './db.js';
import { type EventData, eventDataToJson, eventTypeOf } from './event-data.js';
import { newId } from './ids.js';
import { errorMessage, type Logger } from './log.js';
import type { Metrics } from './metrics.js';
import type { NatsConnection } from './nats.js';
import { sleepUnless, withTimeout } from './timing.js';
import { traceContextHeaders } from './trace-context.js';

/**
 * Transactional outbox (docs/events.md#the-outbox-events-are-never-lost): a service writes its state change and the event row
 * in one transaction; a relay publishes committed rows to JetStream with `Nats-Msg-Id` =
 * event id, so the stream drops duplicates within its window, and consumers dedupe the rest.
 */

/**
 * The relays of this process: a commit that wrote events wakes them at once (afterCommit), so
 * the transaction that writes an event takes no lock for it. A NOTIFY inside it would: Postgres
 * serializes the commits of notifying transactions, flush included (measured here: 1,400-1,800
 * transactions/s without, 420-570 with). Each replica's relay publishes what its own process
 * committed; rows written elsewhere are found by the poll (pollIntervalMs).
 */
const relayWakers = new Set<() => void>();

function wakeRelays(): void {
  for (const wake of relayWakers) wake();
}

/**
 * Creates `outbox` and `processed_events` in the current schema (the knex search_path). Call it
 * from the service's first migration.
 */
export async function createOutboxTables(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE IF NOT EXISTS outbox (
      id bigserial PRIMARY KEY,
      event_id text NOT NULL UNIQUE,
      subject text NOT NULL,
      payload jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      published_at timestamptz NULL,
      attempts integer NOT NULL DEFAULT 0,
      last_error text NULL,
      trace_context jsonb NULL
    )`);
  await knex.raw('CREATE INDEX IF NOT EXISTS outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL');
  await knex.raw(`
    CREATE TABLE IF NOT EXISTS processed_events (
      consumer text NOT NULL,
      event_id text NOT NULL,
      processed_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (consumer, event_id)
    )`);
}

/** The `down` of the migration that created the outbox tables. */
export async function dropOutboxTables(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('processed_events').dropTableIfExists('outbox');
}

/**
 * Adds `outbox.trace_context` to a schema whose outbox predates it (createOutboxTables has it):
 * the trace context of the request that wrote the event, sent as NATS headers with it.
 */
export async function addOutboxTraceContext(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE outbox ADD COLUMN IF NOT EXISTS trace_context jsonb NULL');
}

export async function dropOutboxTraceContext(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE outbox DROP COLUMN IF EXISTS trace_context');
}

/** The envelope of an event, its data already in JSON form. */
export interface EventEnvelopeInput {
  /** Dotted event type, e.g. "key.created"; the subject is `<prefix>.<type>`. */
  type: string;
  workspaceId?: string;
  data: JsonObject;
  requestId?: string;
}

/** What a producer writes besides the payload's schema (docs/events.md, "How events are typed"). */
export interface RecordEventInput<Desc extends DescMessage> {
  workspaceId?: string;
  /** The payload message (or its init object) of the schema's type. */
  data: EventData<Desc>;
  requestId?: string;
  /** An id chosen beforehand (`evt_…`), e.g. claimed as an idempotency key in the same transaction; new otherwise. */
  eventId?: string;
}

export interface RecordEventOptions {
  /** The component writing the event ("identity", "keys", ...). */
  producer: string;
  subjectPrefix: string;
}

/** The proto3 JSON form (proto field names) of a new Event envelope. */
export function buildEventPayload(eventId: string, input: EventEnvelopeInput, producer: string, occurredAt = new Date()): JsonObject {
  const event = create(EventSchema, {
    eventId,
    type: input.type,
    workspaceId: input.workspaceId ?? '',
    occurredAt: timestampFromDate(occurredAt),
    data: input.data,
    producer,
    requestId: input.requestId ?? '',
  });
  return toJson(EventSchema, event, { useProtoFieldName: true }) as JsonObject;
}

/** Events stay well under NATS's default max_payload (1 MiB). */
export const maxEventBytes = 256 * 1024;

/**
 * Writes an event into the outbox inside `trx`: it is published only if (and after) the
 * transaction commits. Its type is the one `schema` names; its data the JSON form of
 * `input.data` (event-data.ts). Returns the event id (`evt_…`).
 */
export async function recordEvent<Desc extends DescMessage>(
  trx: Knex.Transaction,
  schema: Desc,
  input: RecordEventInput<Desc>,
  options: RecordEventOptions,
): Promise<string> {
  const [eventId] = await recordEvents(trx, schema, [input], options);
  return eventId;
}

/**
 * Writes events of one type into the outbox inside `trx`, in one statement and in their order (a
 * batch's events cost one round trip, not one each); as recordEvent otherwise. Returns their ids.
 */
export async function recordEvents<Desc extends DescMessage>(
  trx: Knex.Transaction,
  schema: Desc,
  inputs: RecordEventInput<Desc>[],
  options: RecordEventOptions,
): Promise<string[]> {
  if (inputs.length === 0) return [];
  const type = eventTypeOf(schema);
  const subject = `${options.subjectPrefix}.${type}`;
  const traceContext = traceContextHeaders();
  const rows = inputs.map((input) => {
    const eventId = input.eventId ?? newId('evt');
    const data = eventDataToJson(schema, input.data);
    const payload = JSON.stringify(buildEventPayload(eventId, { type, workspaceId: input.workspaceId, data, requestId: input.requestId }, options.producer));
    // An event NATS would refuse (max_payload) would block the outbox for ever: refuse it here,
    // with the state change it belongs to.
    if (Buffer.byteLength(payload) > maxEventBytes) throw new Error(`event ${type} is ${Buffer.byteLength(payload)} bytes; at most ${maxEventBytes}`);
    return { event_id: eventId, subject, payload, trace_context: traceContext };
  });
  await trx('outbox').insert(rows);
  // On commit only: never for a rolled-back event.
  afterCommit(trx, wakeRelays);
  return rows.map((row) => row.event_id);
}

/**
 * The outbox's backlog when scraped: the age of the oldest unpublished event (0 when none) and
 * how many wait. A growing age means events are not reaching NATS.
 */
export function watchOutbox(metrics: Metrics, db: Knex, schema: string): void {
  const unpublished = () => db.withSchema(schema).from('outbox').whereNull('published_at');
  metrics.gauge('outbox_oldest_unpublished_age_seconds', 'Age of the oldest event not yet published to NATS (0 when none).', [], async (gauge) => {
    const row = await unpublished().first(db.raw('coalesce(extract(epoch from now() - min(created_at)), 0)::float8 AS age'));
    gauge.set(Number(row?.age ?? 0));
  });
  metrics.gauge('outbox_unpublished_events', 'Events written but not yet published to NATS.', [], async (gauge) => {
    const row = await unpublished().first(db.raw('count(*)::int AS waiting'));
    gauge.set(Number(row?.waiting ?? 0));
  });
}

export interface OutboxRelayOptions {
  db: Knex;
  /** The schema holding the `outbox` table (the service's schema). */
  schema: string;
  nats: Promise<NatsConnection> | NatsConnection;
  log: Logger;
  /** Rows claimed per transaction (default 100). */
  batchSize?: number;
  /** How long to wait for each PubAck (default 5000 ms). */
  publishTimeoutMs?: number;
  /** Fallback poll interval when no notification arrives (default 1000 ms). */
  pollIntervalMs?: number;
  /** Cap of the retry back-off while NATS or Postgres fail (default 2000 ms). */
  maxBackoffMs?: number;
  /** Where the relay's transactions that published rows are counted (outbox_relay_batches_total). */
  metrics?: Metrics;
}

export interface OutboxRelay {
  stop(): Promise<void>;
}

interface OutboxRow {
  id: number;
  event_id: string;
  subject: string;
  payload: unknown;
  trace_context: Record<string, string> | null;
}

/** The message headers that carry an event's trace context to its consumers. */
function traceHeaders(traceContext: Record<string, string> | null): MsgHdrs | undefined {
  if (!traceContext) return undefined;
  const result = headers();
  for (const [name, value] of Object.entries(traceContext)) result.set(name, value);
  return result;
}

/** A wake-up flag with a waitable, time-bounded edge. */
class Signal {
  private pending = false;
  private release: (() => void) | undefined;

  notify(): void {
    this.pending = true;
    this.release?.();
  }

  /** Clears a pending notification; true when there was one. */
  take(): boolean {
    const was = this.pending;
    this.pending = false;
    return was;
  }

  /** Resolves on the next notification (or a pending one) or after `ms`. */
  wait(ms: number): Promise<void> {
    if (this.take()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.release = undefined;
        this.pending = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.release = done;
    });
  }
}

/**
 * Publishes committed outbox rows of `schema` to JetStream, in id order, until stopped. Wakes when
 * a transaction of this process that wrote events commits, and polls for the others; keeps rows
 * and retries with a capped back-off while NATS or Postgres are unavailable.
 */
export function startOutboxRelay(options: OutboxRelayOptions): OutboxRelay {
  const { db, schema, log } = options;
  const batchSize = options.batchSize ?? 100;
  const publishTimeoutMs = options.publishTimeoutMs ?? 5000;
  const pollIntervalMs = options.pollIntervalMs ?? 1000;
  const maxBackoffMs = options.maxBackoffMs ?? 2000;
  const pruneIntervalMs = 10 * 60_000;
  const relayLog = log.child({ component: 'outbox-relay', schema });
  const natsReady = Promise.resolve(options.nats);
  natsReady.catch(() => undefined); // reported where it is awaited

  let stopped = false;
  let resolveStopped!: () => void;
  const stoppedPromise = new Promise<void>((resolve) => (resolveStopped = resolve));
  const wake = new Signal();

  const waker = () => wake.notify();
  relayWakers.add(waker);

  // --- publishing --------------------------------------------------------------------------
  let js: { nc: NatsConnection; client: JetStreamClient } | undefined;

  const jetStreamClient = async (): Promise<JetStreamClient> => {
    const nc = await withTimeout(natsReady, publishTimeoutMs, 'waiting for NATS');
    if (nc.isClosed()) throw new Error('NATS connection is closed');
    if (js?.nc !== nc) js = { nc, client: jetstream(nc, { timeout: publishTimeoutMs }) };
    return js.client;
  };

  /** Publishes one batch; returns whether a full batch went out (more may be waiting). */
  const publishBatch = async (): Promise<{ published: number; full: boolean; error?: unknown }> => {
    const client = await jetStreamClient();
    return db.transaction(async (trx) => {
      const rows: OutboxRow[] = await trx
        .withSchema(schema)
        .from('outbox')
        .select('id', 'event_id', 'subject', 'payload', 'trace_context')
        .whereNull('published_at')
        .orderBy('id')
        .limit(batchSize)
        .forUpdate()
        .skipLocked();
      if (rows.length === 0) return { published: 0, full: false };
      // Sent in id order on one connection (so stored in that order); acks awaited together.
      const results = await Promise.allSettled(
        rows.map((row) =>
          client.publish(row.subject, typeof row.payload === 'string' ? row.payload : JSON.stringify(row.payload), {
            msgID: row.event_id,
            timeout: publishTimeoutMs,
            headers: traceHeaders(row.trace_context),
          }),
        ),
      );
      options.metrics?.counter('outbox_relay_batches_total', 'Relay transactions that published outbox rows.', []).inc();
      const publishedIds = rows.filter((_, i) => results[i].status === 'fulfilled').map((row) => row.id);
      if (publishedIds.length > 0) {
        await trx
          .withSchema(schema)
          .table('outbox')
          .whereIn('id', publishedIds)
          .update({ published_at: trx.fn.now(), attempts: trx.raw('attempts + 1') });
      }
      let firstError: unknown;
      for (const [i, result] of results.entries()) {
        if (result.status === 'fulfilled') continue;
        firstError ??= result.reason;
        await trx
          .withSchema(schema)
          .table('outbox')
          .where('id', rows[i].id)
          .update({ attempts: trx.raw('attempts + 1'), last_error: errorMessage(result.reason) });
      }
      return { published: publishedIds.length, full: rows.length === batchSize && firstError === undefined, error: firstError };
    });
  };

  const publishLoop = async () => {
    let failures = 0;
    while (!stopped) {
      wake.take();
      let outcome: { published: number; full: boolean; error?: unknown };
      try {
        outcome = await publishBatch();
      } catch (err) {
        outcome = { published: 0, full: false, error: err };
      }
      if (stopped) break;
      if (outcome.error !== undefined) {
        failures++;
        if (failures === 1 || failures % 30 === 0) relayLog.warn({ err: errorMessage(outcome.error), failures }, 'outbox publish failed; retrying');
        await sleepUnless(Math.min(100 * 2 ** (failures - 1), maxBackoffMs), stoppedPromise);
        continue;
      }
      if (failures > 0) relayLog.info({ failures }, 'outbox publishing recovered');
      failures = 0;
      if (outcome.full) {
        await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      await wake.wait(pollIntervalMs);
    }
  };

  // Published rows and processed-event records are kept for a while (for debugging and for
  // redeliveries within the stream's retention), then deleted so the tables stay small.
  const pruneLoop = async () => {
    while (!stopped) {
      await sleepUnless(pruneIntervalMs, stoppedPromise);
      if (stopped) break;
      try {
        await db.withSchema(schema).from('outbox').where('published_at', '<', db.raw(`now() - interval '1 day'`)).delete();
        await db.withSchema(schema).from('processed_events').where('processed_at', '<', db.raw(`now() - interval '8 days'`)).delete();
      } catch (err) {
        relayLog.warn({ err: errorMessage(err) }, 'outbox pruning failed; retrying later');
      }
    }
  };

  const loops = Promise.allSettled([publishLoop(), pruneLoop()]);

  return {
    async stop() {
      if (stopped) return void (await loops);
      stopped = true;
      resolveStopped();
      wake.notify();
      relayWakers.delete(waker);
      // Every wait inside the loops is bounded; this is a last guard against a stuck stop.
      await withTimeout(loops, 15_000, 'outbox relay stop').catch((err) => relayLog.warn({ err: errorMessage(err) }, 'outbox relay stop'));
    },
  };
}
