import { type DescMessage, fromJson, type JsonObject, type JsonValue, type MessageShape, toJson } from '@bufbuild/protobuf';
import { TimestampSchema } from '@bufbuild/protobuf/wkt';
import {
  AckPolicy,
  type ConsumerConfig,
  type ConsumerMessages,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { EventSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { Knex } from './db.js';
import { eventDataFromJson, eventTypeOf } from './event-data.js';

export type { JsMsg } from '@nats-io/jetstream';

import { errorMessage, type Logger } from './log.js';
import type { Metrics } from './metrics.js';
import type { NatsConnection } from './nats.js';
import { sleepUnless, withTimeout } from './timing.js';
import { inSpan, type SpanStart } from './trace-context.js';

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

/** How a durable consumer runs, whatever it hands its handler. */
interface ConsumerSettings {
  db: Knex;
  nats: Promise<NatsConnection> | NatsConnection;
  stream: string;
  log: Logger;
  /** How long NATS waits for an ack before redelivering (default 30 s; kept alive while handling). */
  ackWaitMs?: number;
  /** Cap of the redelivery delay after a failed handler (default 30 s). */
  maxRetryDelayMs?: number;
  /**
   * Events handled at once (default 1: in stream order). More only for handlers whose effects
   * commute (atomic increments, inserts decided by a unique key): each event still has its own
   * transaction, and concurrent commits share the disk flush.
   */
  concurrency?: number;
  /** Where the consumer's lag is reported (`event_consumer_lag_messages`). */
  metrics?: Metrics;
}

/** What the consumer itself reads of an event (for deduplication, logs and traces). */
type EnvelopeIds = Pick<EventEnvelopeJson, 'event_id' | 'type' | 'request_id'>;

/** What a consumer does with the events of its subjects, once parsed into `E`. */
interface ConsumerRun<E extends EnvelopeIds> extends ConsumerSettings {
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
  /** Runs once per event id, inside the transaction that records the event as processed. */
  handle: (event: E, trx: Knex.Transaction) => Promise<void>;
}

/** An envelope-level consumer, of any subjects (the typed one is consumeEvents). */
export interface ConsumerOptions extends Omit<ConsumerRun<EventEnvelopeJson>, 'parse'> {
  /**
   * Turns a message into an envelope (default: `parseEventEnvelope` of its body); throwing
   * terminates the message as malformed. For subjects that outside producers also publish to.
   */
  parse?: (msg: JsMsg) => EventEnvelopeJson;
}

/** The part of a service runtime its event consumers need. */
export interface EventConsumerHost {
  /** The consuming component: durable consumers are named `<name>-<type with dashes>`. */
  name: string;
  db: Knex;
  nats: Promise<NatsConnection> | NatsConnection;
  log: Logger;
  metrics?: Metrics;
  config: { eventsStream: string; eventsSubjectPrefix: string };
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

/** One durable consumer of the type `schema` names, each envelope turned into `E` by `read` (throwing = malformed). */
function subscription<E extends EnvelopeIds>(
  schema: DescMessage,
  read: (envelope: EventEnvelopeJson) => E,
  handle: (event: E, trx: Knex.Transaction) => Promise<void>,
  options: SubscriptionOptions<E>,
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
        durable: `${host.name}-${type.replaceAll('.', '-')}`,
        filterSubjects: [`${host.config.eventsSubjectPrefix}.${type}`],
        parse: (msg) => read(parse(msg)),
        skip: options.skip,
        handle,
      }),
  };
}

/**
 * Consumes the events of the type `schema` names, decoded into that message; one whose data
 * does not fit is malformed (terminated and logged, like a message that is no event).
 */
export function onEvent<Desc extends DescMessage>(
  schema: Desc,
  handle: (event: ReceivedEvent<Desc>, trx: Knex.Transaction) => Promise<void>,
  options: SubscriptionOptions<ReceivedEvent<Desc>> = {},
): EventSubscription {
  return subscription(schema, (envelope) => decodeEvent(schema, envelope), handle, options);
}

/** An event whose data a consumer passes on as it arrived, without reading it. */
export type PassedThroughEvent = Omit<EventEnvelopeJson, 'data'> & { json: JsonObject };

/**
 * Consumes the events of the type `schema` names without decoding their data, for a consumer
 * that only passes it on (webhook fan-out): data a newer or older producer shaped differently is
 * still delivered, never terminated as malformed.
 */
export function onEventPassedThrough(
  schema: DescMessage,
  handle: (event: PassedThroughEvent, trx: Knex.Transaction) => Promise<void>,
  options: SubscriptionOptions<PassedThroughEvent> = {},
): EventSubscription {
  return subscription(
    schema,
    (envelope) => {
      expectType(schema, envelope);
      const { data, ...rest } = envelope;
      return { ...rest, json: data };
    },
    handle,
    options,
  );
}

/**
 * Starts a service's event consumers, one durable consumer per type (a consumer with several
 * subjects needs NATS 2.10; Debian ships 2.9), each handing its handler the decoded payload.
 */
export function consumeEvents(host: EventConsumerHost, subscriptions: EventSubscription[]): EventConsumer[] {
  return subscriptions.map((subscription) => subscription.start(host));
}

export interface EventConsumer {
  stop(): Promise<void>;
}

const ms = (millis: number) => millis * 1_000_000; // JetStream durations are nanoseconds

/** Delay before redelivering a message whose handler failed `deliveryCount` times. */
function retryDelay(deliveryCount: number, cap: number): number {
  return Math.min(200 * 2 ** Math.max(0, Math.min(deliveryCount - 1, 20)), cap);
}

function eventSpan(msg: JsMsg, event: EnvelopeIds, durable: string): SpanStart {
  return {
    name: `process ${event.type}`,
    kind: 'consumer',
    carrier: msg.headers,
    attributes: {
      'messaging.system': 'nats',
      'messaging.operation.type': 'process',
      'messaging.destination.name': msg.subject,
      'messaging.consumer.group.name': durable,
      'messaging.message.id': event.event_id,
      'switchboard.request_id': event.request_id,
    },
  };
}

/** The lag of each durable consumer of a process, by registry: one gauge, a series per durable. */
const lagSources = new WeakMap<Metrics, Map<string, () => Promise<number | undefined>>>();

function reportLag(metrics: Metrics, durable: string, read: () => Promise<number | undefined>): () => void {
  let sources = lagSources.get(metrics);
  if (!sources) {
    const known = new Map<string, () => Promise<number | undefined>>();
    sources = known;
    lagSources.set(metrics, known);
    metrics.gauge(
      'event_consumer_lag_messages',
      'Events of the stream a durable consumer has not acknowledged yet (pending + in flight).',
      ['durable'],
      async (gauge) => {
        gauge.reset();
        await Promise.all(
          [...known].map(async ([name, lag]) => {
            const value = await lag().catch(() => undefined);
            if (value !== undefined) gauge.set({ durable: name }, value);
          }),
        );
      },
    );
  }
  sources.set(durable, read);
  return () => sources.delete(durable);
}

/**
 * Consumes events from a durable JetStream consumer, exactly once per event id per durable:
 * `processed_events` (in the handler's transaction) absorbs redeliveries and duplicates.
 * Survives NATS restarts; stops cleanly.
 */
export function startConsumer(options: ConsumerOptions): EventConsumer {
  return runConsumer({ ...options, parse: options.parse ?? ((msg: JsMsg) => parseEventEnvelope(msg.data)) });
}

function runConsumer<E extends EnvelopeIds>(options: ConsumerRun<E>): EventConsumer {
  const { db, stream, durable, log, handle, parse } = options;
  const ackWaitMs = options.ackWaitMs ?? 30_000;
  const maxRetryDelayMs = options.maxRetryDelayMs ?? 30_000;
  const concurrency = Math.max(1, options.concurrency ?? 1);
  const consumerLog = log.child({ component: 'event-consumer', stream, durable });
  if (options.filterSubjects.length === 0) throw new Error('startConsumer needs at least one filter subject');
  const natsReady = Promise.resolve(options.nats);
  natsReady.catch(() => undefined); // reported where it is awaited

  let stopped = false;
  let resolveStopped!: () => void;
  const stoppedPromise = new Promise<void>((resolve) => (resolveStopped = resolve));
  let messages: ConsumerMessages | undefined;

  // One filter goes in `filter_subject` (every server); several need NATS ≥ 2.10.
  const filters: Partial<ConsumerConfig> =
    options.filterSubjects.length === 1
      ? { filter_subject: options.filterSubjects[0], filter_subjects: undefined }
      : { filter_subjects: options.filterSubjects, filter_subject: undefined };

  const ensureConsumer = async (nc: NatsConnection) => {
    const jsm = await jetstreamManager(nc, { timeout: 5000 });
    const wanted: Partial<ConsumerConfig> = { ack_wait: ms(ackWaitMs), max_deliver: -1, ...filters };
    let info: Awaited<ReturnType<typeof jsm.consumers.info>> | undefined;
    try {
      info = await jsm.consumers.info(stream, durable);
    } catch (err) {
      if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound)) throw err;
    }
    if (!info) {
      await jsm.consumers.add(stream, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        max_ack_pending: 1000,
        ...wanted,
      });
      return;
    }
    const current = info.config;
    const sameFilters =
      (current.filter_subject ?? '') === (filters.filter_subject ?? '') &&
      JSON.stringify(current.filter_subjects ?? []) === JSON.stringify(filters.filter_subjects ?? []);
    if (!sameFilters || current.ack_wait !== wanted.ack_wait || current.max_deliver !== -1) {
      await jsm.consumers.update(stream, durable, wanted);
      consumerLog.info('updated durable consumer');
    }
  };

  const processMessage = async (msg: JsMsg) => {
    let event: E;
    try {
      event = parse(msg);
    } catch (err) {
      consumerLog.error({ err: errorMessage(err), subject: msg.subject, seq: msg.seq }, 'malformed event: terminated');
      msg.term(); // no reason text: NATS < 2.10 does not parse `+TERM <reason>` and would redeliver
      return;
    }
    if (options.skip?.(event)) {
      msg.ack();
      return;
    }
    // Long handlers keep the message from being redelivered meanwhile.
    const keepAlive = setInterval(() => msg.working(), Math.max(1000, Math.floor(ackWaitMs / 2)));
    try {
      const handleOnce = () =>
        db.transaction(async (trx) => {
          const inserted = await trx.raw('INSERT INTO processed_events (consumer, event_id) VALUES (?, ?) ON CONFLICT DO NOTHING', [durable, event.event_id]);
          if ((inserted as { rowCount?: number }).rowCount === 1) await handle(event, trx);
        });
      // Traced as a child of the request that wrote the event (its context travels in the headers).
      await inSpan(eventSpan(msg, event, durable), handleOnce);
      msg.ack();
    } catch (err) {
      const delay = retryDelay(msg.info.deliveryCount, maxRetryDelayMs);
      consumerLog.warn(
        { err: errorMessage(err), event_id: event.event_id, type: event.type, delivery: msg.info.deliveryCount, retry_in_ms: delay },
        'event handler failed; retrying',
      );
      msg.nak(delay);
    } finally {
      clearInterval(keepAlive);
    }
  };

  const run = async () => {
    let failures = 0;
    while (!stopped) {
      try {
        const nc = await withTimeout(Promise.race([natsReady, stoppedPromise.then(() => undefined)]), 5000, 'waiting for NATS');
        if (!nc || stopped) break;
        await ensureConsumer(nc);
        const consumer = await jetstream(nc, { timeout: 5000 }).consumers.get(stream, durable);
        const iterator = await consumer.consume({ max_messages: 64 });
        messages = iterator;
        if (stopped) break;
        failures = 0;
        consumerLog.debug('consuming');
        // The client recovers from reconnects itself; a vanished consumer or stream needs us.
        void (async () => {
          for await (const status of iterator.status()) {
            if (status.type === 'consumer_deleted' || (status.type === 'consumer_not_found' && status.count > 1) || status.type === 'stream_not_found') {
              consumerLog.warn({ status: status.type }, 'consumer lost; re-creating');
              iterator.stop();
            }
          }
        })().catch(() => undefined);
        const inFlight = new Set<Promise<void>>();
        for await (const msg of iterator) {
          if (stopped) break; // unacked messages are redelivered after ack_wait
          const handled: Promise<void> = processMessage(msg).finally(() => inFlight.delete(handled));
          inFlight.add(handled);
          if (inFlight.size >= concurrency) await Promise.race(inFlight);
        }
        await Promise.all(inFlight);
        if (!stopped) consumerLog.warn('consume iterator ended; restarting');
      } catch (err) {
        if (!stopped) consumerLog.warn({ err: errorMessage(err) }, 'consumer failed; restarting');
      } finally {
        messages?.stop();
        messages = undefined;
      }
      if (stopped) break;
      failures++;
      await sleepUnless(Math.min(100 * 2 ** failures, 2000), stoppedPromise);
    }
  };

  const loop = run();
  // One manager for every scrape: creating one costs an account-info request (checkAPI).
  let lagManager: Promise<JetStreamManager> | undefined;
  const unreport = options.metrics
    ? reportLag(options.metrics, durable, async () => {
        lagManager ??= withTimeout(natsReady, 1000, 'waiting for NATS').then((nc) => jetstreamManager(nc, { timeout: 2000, checkAPI: false }));
        lagManager.catch(() => (lagManager = undefined));
        const info = await (await lagManager).consumers.info(stream, durable);
        return info.num_pending + info.num_ack_pending;
      })
    : () => undefined;

  return {
    async stop() {
      if (!stopped) {
        stopped = true;
        resolveStopped();
        messages?.stop();
        unreport();
      }
      // Lets a running handler finish (its statements are bounded by statement_timeout).
      await withTimeout(loop, 15_000, 'consumer stop').catch((err) => consumerLog.warn({ err: errorMessage(err) }, 'consumer stop'));
    },
  };
}
