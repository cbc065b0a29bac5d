import type { JetStreamClient } from '@nats-io/jetstream';
import { errorMessage, type Logger } from '@switchboard/runtime/log';
import type { Metrics } from '@switchboard/runtime/metrics';

/**
 * Usage records and exchanges on their way to JetStream (docs/money-path.md#usage). A record is
 * durable once the stream acknowledged it, and that happens before the answer's last byte: what a
 * client was told it cost is never lost. The message id is the generation id, so a publish that
 * is retried after a lost acknowledgement is stored once (and billing dedupes by it anyway).
 *
 * When JetStream cannot take a record (NATS down, the stream full), it waits in a bounded queue
 * here and is retried in the background. Each request holds places in that queue before it calls
 * the upstream (`hold`): when the queue cannot promise them, the request is refused with 503 then,
 * rather than producing usage that could not be kept.
 */

export interface WorkPublisherDeps {
  log: Logger;
  /** Resolves once NATS is reachable: until then records wait in the queue (a data plane starts without NATS). */
  js: JetStreamClient | Promise<JetStreamClient>;
  /** How many records may wait (queued, plus the places requests in flight hold). */
  maxQueued: number;
  publishTimeoutMs?: number;
  metrics?: Metrics;
}

interface Pending {
  subject: string;
  data: Uint8Array;
  msgId: string;
}

export class WorkPublisher {
  private readonly queue: Pending[] = [];
  private held = 0;
  private retrying?: Promise<void>;
  private stopping = false;
  private js?: JetStreamClient;

  constructor(private readonly deps: WorkPublisherDeps) {
    Promise.resolve(deps.js).then(
      (js) => {
        this.js = js;
      },
      () => undefined,
    );
    deps.metrics?.gauge('work_queue_records', 'Usage records and exchanges waiting for JetStream in this data plane.', [], (gauge) =>
      gauge.set({}, this.queue.length),
    );
  }

  /** Places for `count` records, taken before the upstream call; undefined when the queue is full. */
  hold(count: number): { release(): void } | undefined {
    if (this.queue.length + this.held + count > this.deps.maxQueued) return undefined;
    this.held += count;
    let left = count;
    return {
      release: () => {
        this.held -= left;
        left = 0;
      },
    };
  }

  /** Resolves once the record is in JetStream or, when it cannot take it now, in the retry queue. */
  async publish(subject: string, data: Uint8Array, msgId: string): Promise<void> {
    const pending = { subject, data, msgId };
    if (this.queue.length === 0) {
      try {
        await this.send(pending);
        return;
      } catch (err) {
        this.deps.log.warn({ err: errorMessage(err), msg_id: msgId }, 'JetStream did not take a record; queued for retry');
      }
    }
    // Behind records already waiting: they go first, in order.
    this.queue.push(pending);
    this.retrying ??= this.retry().finally(() => {
      this.retrying = undefined;
    });
  }

  get queued(): number {
    return this.queue.length;
  }

  /** At shutdown: keeps retrying for at most `timeoutMs`, then reports what could not be kept. */
  async drain(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.queue.length > 0 && Date.now() < deadline) {
      this.retrying ??= this.retry().finally(() => {
        this.retrying = undefined;
      });
      await Promise.race([this.retrying, new Promise((resolve) => setTimeout(resolve, 100))]);
    }
    this.stopping = true;
    if (this.queue.length > 0) {
      this.deps.log.error(
        { records: this.queue.length, msg_ids: this.queue.slice(0, 100).map((pending) => pending.msgId) },
        'usage records JetStream never took are lost with this process',
      );
    }
  }

  private send(pending: Pending): Promise<unknown> {
    if (!this.js) return Promise.reject(new Error('NATS is not connected yet'));
    return this.js.publish(pending.subject, pending.data, { msgID: pending.msgId, timeout: this.deps.publishTimeoutMs ?? 2000 });
  }

  private async retry(): Promise<void> {
    let delayMs = 100;
    while (this.queue.length > 0 && !this.stopping) {
      try {
        await this.send(this.queue[0]);
        this.queue.shift();
        delayMs = 100;
      } catch (err) {
        this.deps.log.warn({ err: errorMessage(err), queued: this.queue.length }, 'JetStream still refuses records; retrying');
        await new Promise((resolve) => setTimeout(resolve, delayMs));
        delayMs = Math.min(delayMs * 2, 2000);
      }
    }
  }
}
