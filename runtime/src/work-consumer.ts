import type { JsMsg } from '@nats-io/jetstream';
import type { Knex } from './db.js';
import { type DurableConsumer, runDurableConsumer } from './durable-consumer.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';
import { ensureWorkStream, type NatsConnection } from './nats.js';

/** The part of a service runtime a work consumer needs (a ServiceRuntime is one). */
export interface WorkConsumerHost {
  db: Knex;
  nats: Promise<NatsConnection> | NatsConnection;
  log: Logger;
  metrics?: Metrics;
  config: { workStream: string; workSubjectPrefix: string; batchLingerMs?: number };
}

export interface WorkConsumerOptions<T> {
  /** The durable consumer's name (e.g. `billing-usage`): one per service and subject. */
  durable: string;
  /** The subject consumed: one of workSubjects(host.config.workSubjectPrefix). */
  subject: string;
  /** Turns a message into an item (e.g. fromBinary of its proto); throwing terminates that message alone, logged as malformed. */
  decode: (msg: JsMsg) => T;
  /**
   * Handles a batch in one transaction. A message can come again (a redelivery after a failed
   * commit or a lost ack, or the same item published twice), and nothing records what was
   * handled: the handler is idempotent by the item's own key (e.g. INSERT … ON CONFLICT
   * (generation_id) DO NOTHING RETURNING, then acting on the returned rows only).
   */
  handle: (items: T[], trx: Knex.Transaction) => Promise<void>;
  /** The most items of one transaction (default 256). */
  maxBatch?: number;
}

/**
 * Consumes a subject of the work stream (docs/money-path.md#usage) in batches: the messages
 * received so far, at most `maxBatch`, gathered for at most BATCH_LINGER, go to `handle` in one
 * transaction; every message is acked after the commit, and all of the batch are redelivered
 * after a delay when it fails. Creates the work stream when missing. Stop it with `stop()`
 * (a BackgroundTask of runService).
 */
export function consumeWork<T>(host: WorkConsumerHost, options: WorkConsumerOptions<T>): DurableConsumer {
  const { db, config } = host;
  const { durable, subject } = options;
  return runDurableConsumer<T>({
    nats: host.nats,
    stream: config.workStream,
    log: host.log,
    metrics: host.metrics,
    durable,
    filterSubjects: [subject],
    prepare: (nc) => ensureWorkStream(nc, config.workStream, config.workSubjectPrefix),
    maxBatch: options.maxBatch ?? 256,
    lingerMs: config.batchLingerMs,
    decode: options.decode,
    handle: (items) => db.transaction((trx) => options.handle(items, trx)),
    span: (msgs) => ({
      name: `process ${subject}`,
      kind: 'consumer',
      carrier: msgs[0].headers,
      attributes: {
        'messaging.system': 'nats',
        'messaging.operation.type': 'process',
        'messaging.destination.name': subject,
        'messaging.consumer.group.name': durable,
        'messaging.batch.message_count': msgs.length,
      },
    }),
  });
}
