import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import {
  deleteOldDeliveries,
  deleteUnreferencedEvents,
  dropOldResponseBodies,
  type RetentionBatchResult,
  type RetentionMark,
  walkFrom,
  walkStart,
} from './store/retention.js';

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
const targetBatchMs = 20;
const firstBatch = 500;
const minBatch = 10;
const maxBatch = 2_000;

export class Retention {
  private readonly sizes = new Map<RetentionStep, number>();

  constructor(private readonly deps: RetentionDeps) {}

  /** One pass over what is old enough now; what each step removed. */
  async run(): Promise<Record<RetentionStep, number>> {
    const { retentionMs } = this.deps;
    const done = {
      deliveries: await this.walk('deliveries', (db, after, limit) => deleteOldDeliveries(db, retentionMs, after, limit)),
      events: await this.walk('events', (db, after, limit) => deleteUnreferencedEvents(db, retentionMs, after, limit)),
      // From the retention's age on: the older attempts went with their deliveries just now (but
      // those of the few deliveries kept past it, docs/webhooks.md#retention), and their index
      // entries (dead until a vacuum) would make the first batch scan them all.
      bodies: await this.walk(
        'bodies',
        (db, after, limit) => dropOldResponseBodies(db, responseBodyRetentionMs, after, limit),
        await walkFrom(this.deps.db, retentionMs),
      ),
    };
    if (done.deliveries + done.events + done.bodies > 0) this.deps.log.info(done, 'webhook retention: old deliveries, events and response bodies removed');
    return done;
  }

  /** Batches from the oldest row onwards until one looks at fewer rows than it could. */
  private async walk(
    step: RetentionStep,
    batch: (db: Knex, after: RetentionMark, limit: number) => Promise<RetentionBatchResult>,
    start = walkStart,
  ): Promise<number> {
    let total = 0;
    let after = start;
    for (;;) {
      const size = this.sizes.get(step) ?? firstBatch;
      const started = performance.now();
      const result = await batch(this.deps.db, after, size);
      const ms = performance.now() - started;
      this.deps.onBatch?.({ step, rows: result.removed, ms });
      total += result.removed;
      if (ms > targetBatchMs) this.sizes.set(step, Math.max(minBatch, Math.floor(size / 2)));
      else if (result.scanned === size && ms < targetBatchMs / 2) this.sizes.set(step, Math.min(maxBatch, size * 2));
      // The rows another transaction held were skipped: the next run takes them.
      if (result.scanned < size || !result.last) return total;
      after = result.last;
    }
  }
}
