import { type JetStreamClient, jetstream } from '@nats-io/jetstream';
import { AuditRecordedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { type AuditRecord, auditRecordLine, toEventData } from './audit.js';
import { eventDataToJson, eventTypeOf } from './event-data.js';
import { newId } from './ids.js';
import { errorMessage, type Logger } from './log.js';
import type { Metrics } from './metrics.js';
import type { NatsConnection } from './nats.js';
import { buildEventPayload } from './outbox.js';

/**
 * Audit records of a component without a database (so without an outbox): published straight to the
 * event stream as `audit.recorded` events, in the envelope an outbox relay publishes
 * (buildEventPayload, Nats-Msg-Id = event id), so the audit log's consumer cannot tell them
 * apart. Best effort by design (docs/decisions.md): a bounded in-memory queue that a request
 * never waits on; when it is full (NATS down for long) a record is dropped and counted
 * (`audit_records_dropped_total`), and its audit log line stays. Records still queued when the
 * process stops are lost after `stop`'s deadline.
 */
export interface AuditPublisherOptions {
  nats: Promise<NatsConnection> | NatsConnection;
  subjectPrefix: string;
  /** The component publishing: the envelope's producer. */
  producer: string;
  log: Logger;
  metrics?: Metrics;
  /** Records waiting at most (default 10,000); more are dropped. */
  maxQueued?: number;
  /** How long to wait for each PubAck (default 5000 ms). */
  publishTimeoutMs?: number;
}

interface Queued {
  eventId: string;
  payload: string;
  action: string;
}

export class AuditPublisher {
  private readonly queue: Queued[] = [];
  private readonly maxQueued: number;
  private readonly subject: string;
  private readonly natsReady: Promise<NatsConnection>;
  private draining: Promise<void> | undefined;
  private client: { nc: NatsConnection; js: JetStreamClient } | undefined;
  private stopped = false;
  private readonly droppedCounter: { inc(): void } | undefined;
  /** Records dropped because the queue was full, since start. */
  dropped = 0;

  constructor(private readonly options: AuditPublisherOptions) {
    this.maxQueued = options.maxQueued ?? 10_000;
    this.subject = `${options.subjectPrefix}.${eventTypeOf(AuditRecordedSchema)}`;
    this.natsReady = Promise.resolve(options.nats);
    this.natsReady.catch(() => undefined); // reported where it is awaited
    // Registered at once, so a scrape shows 0 before the first drop.
    this.droppedCounter = options.metrics?.counter('audit_records_dropped_total', 'Audit records dropped because the publishing queue was full.', []);
    options.metrics?.gauge('audit_records_queued', 'Audit records waiting to be published to NATS.', [], (gauge) => gauge.set(this.queue.length));
  }

  /** Writes the audit line and queues the record; returns at once, whatever NATS does. */
  publish(record: AuditRecord): void {
    auditRecordLine(this.options.log, record);
    if (record.workspaceId === '' || this.stopped) return;
    if (this.queue.length >= this.maxQueued) {
      this.dropped += 1;
      this.droppedCounter?.inc();
      if (this.dropped === 1 || this.dropped % 1000 === 0)
        this.options.log.error({ dropped: this.dropped, action: record.action }, 'audit record dropped: queue full');
      return;
    }
    const eventId = newId('evt');
    const data = eventDataToJson(AuditRecordedSchema, toEventData(record));
    const envelope = buildEventPayload(
      eventId,
      { type: eventTypeOf(AuditRecordedSchema), workspaceId: record.workspaceId, data, requestId: record.requestId },
      this.options.producer,
    );
    this.queue.push({ eventId, payload: JSON.stringify(envelope), action: record.action });
    this.draining ??= this.drain().finally(() => {
      this.draining = undefined;
    });
  }

  /** Records waiting to be published. */
  get queued(): number {
    return this.queue.length;
  }

  /** Publishes what is queued, in order; a failed publish is retried (same event id: stored once). */
  private async drain(): Promise<void> {
    let failures = 0;
    while (this.queue.length > 0 && !this.stopped) {
      const next = this.queue[0];
      try {
        const js = await this.jetStream();
        await js.publish(this.subject, next.payload, { msgID: next.eventId, timeout: this.options.publishTimeoutMs ?? 5000 });
        this.queue.shift();
        failures = 0;
      } catch (err) {
        failures += 1;
        if (failures === 1 || failures % 30 === 0)
          this.options.log.warn({ err: errorMessage(err), failures, queued: this.queue.length }, 'audit record publish failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** (failures - 1), 2000)));
      }
    }
  }

  private async jetStream(): Promise<JetStreamClient> {
    const nc = await this.natsReady;
    if (nc.isClosed()) throw new Error('NATS connection is closed');
    if (this.client?.nc !== nc) this.client = { nc, js: jetstream(nc, { timeout: this.options.publishTimeoutMs ?? 5000 }) };
    return this.client.js;
  }

  /** Waits up to `timeoutMs` for the queue to empty, then stops publishing. */
  async stop(timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.draining && Date.now() < deadline) {
      await Promise.race([this.draining, new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now())))]);
    }
    this.stopped = true;
    if (this.queue.length > 0) this.options.log.warn({ lost: this.queue.length }, 'audit records not published before stop');
  }
}
