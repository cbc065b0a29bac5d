import { JetStreamApiCodes, JetStreamApiError, jetstreamManager } from '@nats-io/jetstream';
import { errorMessage, type Logger } from './log.js';
import type { NatsConnection } from './nats.js';

/**
 * Read-your-writes across a stream (docs/money-path.md#usage): usage is durable in JetStream
 * before an answer ends, and settled a few milliseconds later. A read that must show every
 * request answered before it (a balance, a usage report, the generation feedback names) first
 * waits until the settling consumer has acknowledged the last message published on its subject
 * when the read began, at most `timeoutMs` (then it answers with what is settled, and says so in
 * the log).
 *
 * Two JetStream API calls when the consumer is caught up, which is the usual case; nothing of
 * this is on the model-request path.
 */

export interface ConsumerBarrierDeps {
  nats: Promise<NatsConnection> | NatsConnection;
  stream: string;
  subject: string;
  durable: string;
  log: Logger;
  timeoutMs?: number;
}

export class ConsumerBarrier {
  constructor(private readonly deps: ConsumerBarrierDeps) {}

  /** True once every message published on the subject before the call is acknowledged; false on timeout or when NATS cannot tell. */
  async caughtUp(): Promise<boolean> {
    const deadline = Date.now() + (this.deps.timeoutMs ?? 2000);
    try {
      const jsm = await jetstreamManager(await this.deps.nats, { timeout: 2000 });
      let target: number;
      try {
        target = (await jsm.streams.getMessage(this.deps.stream, { last_by_subj: this.deps.subject }))?.seq ?? 0;
      } catch (err) {
        if (isNotFound(err)) return true;
        throw err;
      }
      if (target === 0) return true;
      for (let delayMs = 2; ; delayMs = Math.min(delayMs * 2, 50)) {
        const info = await jsm.consumers.info(this.deps.stream, this.deps.durable);
        if (info.ack_floor.stream_seq >= target || (info.num_pending === 0 && info.num_ack_pending === 0)) return true;
        if (Date.now() + delayMs > deadline) break;
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      this.deps.log.warn({ durable: this.deps.durable }, 'a read did not wait for the settling of recent usage: its consumer lags');
    } catch (err) {
      this.deps.log.warn({ err: errorMessage(err), durable: this.deps.durable }, 'could not tell whether recent usage is settled');
    }
    return false;
  }
}

function isNotFound(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.NoMessageFound || err.code === JetStreamApiCodes.StreamNotFound || err.code === JetStreamApiCodes.ConsumerNotFound)
  );
}
