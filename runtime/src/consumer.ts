import { type DescMessage, fromJson, type JsonObject, type JsonValue, type MessageShape, toJson } from '@bufbuild/protobuf';
import { TimestampSchema } from '@bufbuild/protobuf/wkt';
import type { JsMsg } from '@nats-io/jetstream';
import { eventDurable } from '@switchboard/contracts/nats-permissions';
import { EventSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { Knex } from './db.js';
import { type DurableConsumer, type DurableSettings, runDurableConsumer } from './durable-consumer.js';
import { eventDataFromJson, eventTypeOf } from './event-data.js';

export type { JsMsg } from '@nats-io/jetstream';

import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';
import type { NatsConnection } from './nats.js';
import type { SpanStart } from './trace-context.js';

/**
 * The event envelope as consumers see it: the proto3 JSON form with proto field names, every
 * field present (empty strings and `{}` where the wire form omits defaults).
 */
export interface EventEnvelopeJson {
  event_id: string;
  type: string;
  workspace_id: string;
  /** RFC 3339 UTC. */
  occurred_at: string;
  data: JsonObject;
  producer: string;
  request_id: string;
}

/** Parses a message body into an envelope; throws on anything that is not a valid Event. */
export function parseEventEnvelope(body: Uint8Array | string): EventEnvelopeJson {
  const text = typeof body === 'string' ? body : new TextDecoder('utf-8', { fatal: true }).decode(body);
  const json = JSON.parse(text) as JsonValue;
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new Error('event is not a JSON object');
  const event = fromJson(EventSchema, json, { ignoreUnknownFields: true });
  if (!event.eventId) throw new Error('event has no event_id');
  if (!event.type) throw new Error('event has no type');
  return {
    event_id: event.eventId,
    type: event.type,
    workspace_id: event.workspaceId,
    occurred_at: event.occurredAt ? (toJson(TimestampSchema, event.occurredAt) as string) : '',
    data: event.data ?? {},
    producer: event.producer,
    request_id: event.requestId,
  };
}

/**
 * An event as its typed consumer sees it: the envelope with `data` decoded into the payload
 * message of its type (docs/events.md, "How events are typed").
 */
export interface ReceivedEvent<Desc extends DescMessage> extends Omit<EventEnvelopeJson, 'data'> {
  data: MessageShape<Desc>;
  /** The data as it arrived, for whoever passes it on unchanged (webhook deliveries). */
  json: JsonObject;
}

/** Decodes an envelope's data into the payload message `schema`; throws when it is of another type or does not fit. */
export function decodeEvent<Desc extends DescMessage>(schema: Desc, envelope: EventEnvelopeJson): ReceivedEvent<Desc> {
  expectType(schema, envelope);
  return { ...envelope, data: eventDataFromJson(schema, envelope.data), json: envelope.data };
}

/** Throws (malformed) when an envelope on the subject of `schema`'s type says it is of another type. */
function expectType(schema: DescMessage, envelope: EventEnvelopeJson): void {
  const type = eventTypeOf(schema);
  if (envelope.type !== type) throw new Error(`a ${envelope.type} event where ${type} was expected`);
}

/** What the consumer itself reads of an event (for deduplication, logs and traces). */
type EnvelopeIds = Pick<EventEnvelopeJson, 'event_id' | 'type' | 'request_id'>;

/** What a consumer does with the events of its subjects, once parsed into `E`. */
interface ConsumerRun<E extends EnvelopeIds> extends DurableSettings {
  db: Knex;
  /** Durable consumer name; also the `consumer` column of `processed_events`. */
  durable: string;
  filterSubjects: string[];
  /** Turns a message into an event; throwing terminates the message as malformed. */
  parse: (msg: JsMsg) => E;
  /**
   * Events acknowledged without a transaction: their effect was made where they were written
   * (e.g. a service's own events, handled in the transaction of their outbox row).
   */
  skip?: (event: E) => boolean;
  /** Events handled in one transaction (default 1); see onEventBatch. */
  maxBatch?: number;
  /** How long a batch that is not full waits for more (BATCH_LINGER); see onEventBatch. */
  lingerMs?: number;
  /**
   * Transactions at once (default 1: in stream order). More only for handlers whose effects
   * commute (atomic increments, inserts decided by a unique key): concurrent commits share the
   * disk flush.
   */
  concurrency?: number;
  /**
   * Runs once per event id, inside the transaction that records the events as processed: given
   * only the events of the batch not processed before, each once.
   */
  handle: (events: E[], trx: Knex.Transaction) => Promise<void>;
}

/** An envelope-level consumer, of any subjects (the typed one is consumeEvents). */
export interface ConsumerOptions extends Omit<ConsumerRun<EventEnvelopeJson>, 'parse' | 'handle' | 'maxBatch'> {
  /**
   * Turns a message into an envelope (default: `parseEventEnvelope` of its body); throwing
   * terminates the message as malformed. For subjects that outside producers also publish to.
   */
  parse?: (msg: JsMsg) => EventEnvelopeJson;
  /** Runs once per event id, inside the transaction that records the event as processed. */
  handle: (event: EventEnvelopeJson, trx: Knex.Transaction) => Promise<void>;
}

/** The part of a service runtime its event consumers need. */
export interface EventConsumerHost {
  /** The consuming component: durable consumers are named `<name>-<type with dashes>`. */
  name: string;
  db: Knex;
  nats: Promise<NatsConnection> | NatsConnection;
  log: Logger;
  metrics?: Metrics;
  config: { eventsStream: string; eventsSubjectPrefix: string; batchLingerMs?: number };
}

/** One event type a service consumes, and what it does with it: see consumeEvents. */
export interface EventSubscription {
  start(host: EventConsumerHost): EventConsumer;
}

/** What onEvent and onEventPassedThrough take beside the handler. */
interface SubscriptionOptions<E> {
  concurrency?: number;
  /** Turns a message into an envelope (default: `parseEventEnvelope` of its body), for subjects outside producers publish to. */
  parse?: (msg: JsMsg) => EventEnvelopeJson;
  /** Events acknowledged without a transaction: their effect was made where they were written. */
  skip?: (event: E) => boolean;
}

/** What onEventBatch takes beside the handler. */
interface BatchSubscriptionOptions {
  /** The most events of one transaction (default 256). */
  maxBatch?: number;
}

/** Whether a batch that is not full waits BATCH_LINGER for more (default: when batches are allowed). */
interface LingerOption {
  linger?: boolean;
}

/** One durable consumer of the type `schema` names, each envelope turned into `E` by `read` (throwing = malformed). */
function subscription<E extends EnvelopeIds>(
  schema: DescMessage,
  read: (envelope: EventEnvelopeJson) => E,
  handle: (events: E[], trx: Knex.Transaction) => Promise<void>,
  options: SubscriptionOptions<E> & BatchSubscriptionOptions & LingerOption,
): EventSubscription {
  const type = eventTypeOf(schema);
  const parse = options.parse ?? ((msg: JsMsg) => parseEventEnvelope(msg.data));
  return {
    start: (host) =>
      runConsumer({
        db: host.db,
        nats: host.nats,
        stream: host.config.eventsStream,
        log: host.log,
        metrics: host.metrics,
        concurrency: options.concurrency,
        maxBatch: options.maxBatch,
        lingerMs: options.maxBatch && options.maxBatch > 1 && options.linger !== false ? host.config.batchLingerMs : undefined,
        durable: eventDurable(host.name, type),
        filterSubjects: [`${host.config.eventsSubjectPrefix}.${type}`],
        parse: (msg) => read(parse(msg)),
        skip: options.skip,
        handle,
      }),
  };
}

/** A per-event handler as the batch handler of batches of one. */
const one =
  <E>(handle: (event: E, trx: Knex.Transaction) => Promise<void>) =>
  (events: E[], trx: Knex.Transaction) =>
    handle(events[0], trx);

/**
 * Consumes the events of the type `schema` names, decoded into that message; one whose data
 * does not fit is malformed (terminated and logged, like a message that is no event).
 */
export function onEvent<Desc extends DescMessage>(
  schema: Desc,
  handle: (event: ReceivedEvent<Desc>, trx: Knex.Transaction) => Promise<void>,
  options: SubscriptionOptions<ReceivedEvent<Desc>> = {},
): EventSubscription {
  return subscription(schema, (envelope) => decodeEvent(schema, envelope), one(handle), options);
}

/**
 * Like onEvent, for a busy type whose handler gains from doing its work once per batch (one
 * aggregated update per row instead of one per event): the events received so far, at most
 * `maxBatch`, are handled in one transaction, which first records them in processed_events and
 * hands the handler only those not processed before (each once). Every message is acked after
 * the commit, and all are redelivered after a delay when the transaction fails. A batch is what
 * the backlog holds, gathered for at most the host's BATCH_LINGER after its first event.
 */
export function onEventBatch<Desc extends DescMessage>(
  schema: Desc,
  handle: (events: ReceivedEvent<Desc>[], trx: Knex.Transaction) => Promise<void>,
  options: BatchSubscriptionOptions = {},
): EventSubscription {
  return subscription(schema, (envelope) => decodeEvent(schema, envelope), handle, { maxBatch: options.maxBatch ?? 256 });
}

/** An event whose data a consumer passes on as it arrived, without reading it. */
export type PassedThroughEvent = Omit<EventEnvelopeJson, 'data'> & { json: JsonObject };

/**
 * Consumes the events of the type `schema` names without decoding their data, for a consumer
 * that only passes it on (webhook fan-out): data a newer or older producer shaped differently is
 * still delivered, never terminated as malformed. The handler gets what the backlog holds, at
 * most `maxBatch` events (default 1) in one transaction, gathered without lingering: a quiet
 * stream's event is handled at once, a busy one's in batches.
 */
export function onEventPassedThrough(
  schema: DescMessage,
  handle: (events: PassedThroughEvent[], trx: Knex.Transaction) => Promise<void>,
  options: SubscriptionOptions<PassedThroughEvent> & BatchSubscriptionOptions = {},
): EventSubscription {
  return subscription(
    schema,
    (envelope) => {
      expectType(schema, envelope);
      const { data, ...rest } = envelope;
      return { ...rest, json: data };
    },
    handle,
    { ...options, linger: false },
  );
}

/**
 * Starts a service's event consumers, one durable consumer per type (a consumer with several
 * subjects needs NATS 2.10; Debian ships 2.9), each handing its handler the decoded payload.
 */
export function consumeEvents(host: EventConsumerHost, subscriptions: EventSubscription[]): EventConsumer[] {
  return subscriptions.map((subscription) => subscription.start(host));
}

export type EventConsumer = DurableConsumer;

/** The span of a batch: a child of the request that wrote its first event (its context travels in the headers). */
function eventSpan(msgs: JsMsg[], events: EnvelopeIds[], durable: string): SpanStart {
  const [msg] = msgs;
  const [event] = events;
  const attributes: Record<string, string | number> = {
    'messaging.system': 'nats',
    'messaging.operation.type': 'process',
    'messaging.destination.name': msg.subject,
    'messaging.consumer.group.name': durable,
  };
  if (events.length === 1) {
    attributes['messaging.message.id'] = event.event_id;
    attributes['switchboard.request_id'] = event.request_id;
  } else {
    attributes['messaging.batch.message_count'] = events.length;
  }
  return { name: `process ${event.type}`, kind: 'consumer', carrier: msg.headers, attributes };
}

/**
 * Consumes events from a durable JetStream consumer, exactly once per event id per durable:
 * `processed_events` (in the handler's transaction) absorbs redeliveries and duplicates.
 * Survives NATS restarts; stops cleanly.
 */
export function startConsumer(options: ConsumerOptions): EventConsumer {
  return runConsumer({ ...options, handle: one(options.handle), parse: options.parse ?? ((msg: JsMsg) => parseEventEnvelope(msg.data)) });
}

function runConsumer<E extends EnvelopeIds>(options: ConsumerRun<E>): EventConsumer {
  const { db, durable, handle, skip, parse, ...loop } = options;
  return runDurableConsumer<E>({
    ...loop,
    durable,
    decode: parse,
    span: (msgs, events) => eventSpan(msgs, events, durable),
    describe: (events) => (events.length === 1 ? { event_id: events[0].event_id, type: events[0].type } : { type: events[0].type }),
    async handle(batch) {
      const wanted = skip ? batch.filter((event) => !skip(event)) : batch;
      if (wanted.length === 0) return;
      await db.transaction(async (trx) => {
        const { rows } = await trx.raw<{ rows: Array<{ event_id: string }> }>(
          'INSERT INTO processed_events (consumer, event_id) SELECT ?, unnest(?::text[]) ON CONFLICT DO NOTHING RETURNING event_id',
          [durable, wanted.map((event) => event.event_id)],
        );
        const fresh = new Set(rows.map((row) => row.event_id));
        // An event published twice under two message ids can be in one batch: it is handled once.
        const events = wanted.filter((event) => fresh.delete(event.event_id));
        if (events.length > 0) await handle(events, trx);
      });
    },
  });
}
