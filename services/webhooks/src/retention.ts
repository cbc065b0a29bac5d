import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import { deleteOldDeliveries, deleteUnreferencedEvents, dropOldResponseBodies } from './store/retention.js';

/**
 * Retention (docs/webhooks.md#retention): deliveries and their attempts older than
 * WEBHOOK_RETENTION go, then the events no delivery references any more, and response bodies
 * older than 7 days are dropped. Each batch is one short statement of its own (its locks end with
 * it); the batch size adapts so that a batch takes about `targetBatchMs`, well under the 100 ms a
 * batch may hold its locks. Rows a claim or an outcome holds are skipped, never waited for, so
 * deliveries go on meanwhile; several replicas may run it at once (they skip each other's rows).
 */

export interface RetentionDeps {
  db: Knex;
  log: Logger;
  /** WEBHOOK_RETENTION: how long deliveries, their attempts and events are kept. */
  retentionMs: number;
  /** Each batch as it ends (the bench's lock-hold figures). */
  onBatch?: (batch: RetentionBatch) => void;
}

export type RetentionStep = 'deliveries' | 'events' | 'bodies';

export interface RetentionBatch {
  step: RetentionStep;
  rows: number;
  ms: number;
}

/** docs/webhooks.md#retention: response bodies are kept 7 days. */
export const responseBodyRetentionMs = 7 * 24 * 3_600_000;
/** What a batch aims at; it halves when a batch takes longer, and doubles (up to the maximum) while full batches are quick. */
const targetBatchMs = 25;
const firstBatch = 500;
const minBatch = 10;
const maxBatch = 5_000;

export class Retention {
  private readonly sizes = new Map<RetentionStep, number>();

  constructor(private readonly deps: RetentionDeps) {}

  /** One pass until nothing is left to remove; what each step removed. */
  async run(): Promise<Record<RetentionStep, number>> {
    const { retentionMs } = this.deps;
    const done = {
      deliveries: await this.drain('deliveries', (db, limit) => deleteOldDeliveries(db, retentionMs, limit)),
      events: await this.drain('events', (db, limit) => deleteUnreferencedEvents(db, retentionMs, limit)),
      bodies: await this.drain('bodies', (db, limit) => dropOldResponseBodies(db, responseBodyRetentionMs, limit)),
    };
    if (done.deliveries + done.events + done.bodies > 0) this.deps.log.info(done, 'webhook retention: old deliveries, events and response bodies removed');
    return done;
  }

  private async drain(step: RetentionStep, batch: (db: Knex, limit: number) => Promise<number>): Promise<number> {
    let total = 0;
    for (;;) {
      const size = this.sizes.get(step) ?? firstBatch;
      const started = performance.now();
      const rows = await batch(this.deps.db, size);
      const ms = performance.now() - started;
      this.deps.onBatch?.({ step, rows, ms });
      total += rows;
      if (ms > targetBatchMs) this.sizes.set(step, Math.max(minBatch, Math.floor(size / 2)));
      else if (rows === size && ms < targetBatchMs / 2) this.sizes.set(step, Math.min(maxBatch, size * 2));
      // A short batch took the last rows (or the rest is held by others: the next run takes them).
      if (rows < size) return total;
    }
  }
}
