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
import { errorMessage, type Logger } from './log.js';
import type { Metrics } from './metrics.js';
import type { NatsConnection } from './nats.js';
import { sleepUnless, withTimeout } from './timing.js';
import { inSpan, type SpanStart } from './trace-context.js';

/**
 * The loop under every durable JetStream consumer (events: consumer.ts, work: work-consumer.ts):
 * it creates or updates the durable consumer, hands its handler batches of the messages received
 * so far, acks or naks them, and survives NATS restarts and a vanished consumer or stream.
 */

/** A running durable consumer. */
export interface DurableConsumer {
  stop(): Promise<void>;
}

/** How a durable consumer runs, whatever it hands its handler. */
export interface DurableSettings {
  nats: Promise<NatsConnection> | NatsConnection;
  stream: string;
  log: Logger;
  /** How long NATS waits for an ack before redelivering (default 30 s; kept alive while handling). */
  ackWaitMs?: number;
  /** Cap of the redelivery delay after a failed handler (default 30 s). */
  maxRetryDelayMs?: number;
  /** Where the consumer's lag is reported (`event_consumer_lag_messages`). */
  metrics?: Metrics;
}

export interface DurableRun<T> extends DurableSettings {
  durable: string;
  filterSubjects: string[];
  /** Runs once connected, before the durable consumer is looked up (e.g. creating its stream). */
  prepare?: (nc: NatsConnection) => Promise<void>;
  /**
   * Messages handed to `handle` at once (default 1): those already received, never waiting for
   * more, so a batch grows only with the backlog.
   */
  maxBatch?: number;
  /**
   * How long a batch that is not full waits for more after its first message (default 0). Each
   * batch is a transaction: at a moderate rate a short wait makes them fewer and larger, for a
   * settlement that lags by as much (docs/money-path.md#usage).
   */
  lingerMs?: number;
  /** Batches handled at once (default 1: in stream order). */
  concurrency?: number;
  /** Turns a message into what `handle` takes; throwing terminates that message alone as malformed. */
  decode: (msg: JsMsg) => T;
  /** Every message of the batch is acked once it resolves, and redelivered after a delay when it throws. */
  handle: (items: T[]) => Promise<void>;
  /** The span a batch is handled in (a child of the trace its message carries). */
  span: (msgs: JsMsg[], items: T[]) => SpanStart;
  /** Fields that name a batch in the log of its failure. */
  describe?: (items: T[]) => Record<string, unknown>;
}

const ms = (millis: number) => millis * 1_000_000; // JetStream durations are nanoseconds

/** Delay before redelivering a message whose handler failed `deliveryCount` times. */
function retryDelay(deliveryCount: number, cap: number): number {
  return Math.min(200 * 2 ** Math.max(0, Math.min(deliveryCount - 1, 20)), cap);
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
      'Messages of the stream a durable consumer has not acknowledged yet (pending + in flight).',
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

export function runDurableConsumer<T>(options: DurableRun<T>): DurableConsumer {
  const { stream, durable, log, decode, handle } = options;
  const ackWaitMs = options.ackWaitMs ?? 30_000;
  const maxRetryDelayMs = options.maxRetryDelayMs ?? 30_000;
  const maxBatch = Math.max(1, options.maxBatch ?? 1);
  const lingerMs = maxBatch > 1 ? Math.max(0, options.lingerMs ?? 0) : 0;
  const concurrency = Math.max(1, options.concurrency ?? 1);
  const consumerLog = log.child({ component: 'event-consumer', stream, durable });
  if (options.filterSubjects.length === 0) throw new Error('a durable consumer needs at least one filter subject');
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

  const processBatch = async (msgs: JsMsg[]) => {
    const taken: JsMsg[] = [];
    const items: T[] = [];
    for (const msg of msgs) {
      try {
        items.push(decode(msg));
        taken.push(msg);
      } catch (err) {
        consumerLog.error({ err: errorMessage(err), subject: msg.subject, seq: msg.seq }, 'malformed message: terminated');
        msg.term(); // no reason text: NATS < 2.10 does not parse `+TERM <reason>` and would redeliver
      }
    }
    if (taken.length === 0) return;
    // One transaction per batch: the settlement's cost in Postgres, counted apart from requests'.
    options.metrics?.counter('consumer_batches_total', 'Batches a durable consumer handled (a transaction each).', ['durable']).inc({ durable });
    // Long handlers keep the messages from being redelivered meanwhile.
    const keepAlive = setInterval(
      () => {
        for (const msg of taken) msg.working();
      },
      Math.max(1000, Math.floor(ackWaitMs / 2)),
    );
    try {
      await inSpan(options.span(taken, items), () => handle(items));
      for (const msg of taken) msg.ack();
    } catch (err) {
      const delay = retryDelay(taken[0].info.deliveryCount, maxRetryDelayMs);
      consumerLog.warn(
        { err: errorMessage(err), ...options.describe?.(items), messages: taken.length, delivery: taken[0].info.deliveryCount, retry_in_ms: delay },
        'handler failed; retrying',
      );
      for (const msg of taken) msg.nak(retryDelay(msg.info.deliveryCount, maxRetryDelayMs));
    } finally {
      clearInterval(keepAlive);
    }
  };

  /** Hands the iterator's messages to processBatch until it ends or the consumer stops. */
  const consumeAll = async (iterator: ConsumerMessages) => {
    const received: JsMsg[] = [];
    let ended = false;
    let wake: (() => void) | undefined;
    const pumped = (async () => {
      try {
        for await (const msg of iterator) {
          received.push(msg);
          wake?.();
        }
      } finally {
        ended = true;
        wake?.();
      }
    })();
    pumped.catch(() => undefined); // rethrown below, once the batches in flight are done
    const inFlight = new Set<Promise<void>>();
    while (!stopped) {
      if (received.length === 0) {
        if (ended) break;
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        // The client queues what one read of the socket brought: let it all arrive (microtasks) first.
        await new Promise((resolve) => setImmediate(resolve));
        if (lingerMs > 0 && received.length < maxBatch && !ended) await sleepUnless(lingerMs, stoppedPromise);
        continue;
      }
      const batch = received.splice(0, maxBatch);
      const handled: Promise<void> = processBatch(batch).finally(() => inFlight.delete(handled));
      inFlight.add(handled);
      if (inFlight.size >= concurrency) await Promise.race(inFlight);
    }
    // Unacked messages (in `received` when stopping) are redelivered after ack_wait.
    await Promise.all(inFlight);
    await pumped;
  };

  const run = async () => {
    let failures = 0;
    while (!stopped) {
      try {
        const nc = await withTimeout(Promise.race([natsReady, stoppedPromise.then(() => undefined)]), 5000, 'waiting for NATS');
        if (!nc || stopped) break;
        await options.prepare?.(nc);
        await ensureConsumer(nc);
        const consumer = await jetstream(nc, { timeout: 5000 }).consumers.get(stream, durable);
        const iterator = await consumer.consume({ max_messages: Math.max(64, maxBatch) });
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
        await consumeAll(iterator);
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
