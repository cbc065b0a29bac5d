import type { Logger } from './log.js';

/**
 * Group commit: work submitted while a transaction runs goes together into the next one, so a
 * busy writer pays one transaction (and its round trips and WAL flush) per batch rather than
 * per item, and an idle one still commits an item at once (no timer, no added wait). Each
 * submitter learns its own result only once its batch committed.
 *
 * When a batch fails, its items are committed one by one: an item the database refuses (or a
 * lock timeout) must not cost the others theirs, and each caller gets its own error.
 */
export interface GroupCommitOptions<T, R> {
  /** What the log lines say is committed ("webhook outcomes"). */
  name: string;
  log: Logger;
  /** Items committed in one transaction at most; the rest wait for the next. */
  maxBatch: number;
  /** Commits the items in one transaction; returns each item's result, in their order. */
  commit(items: T[]): Promise<R[]>;
}

interface Waiting<T, R> {
  item: T;
  done: (result: R) => void;
  failed: (err: unknown) => void;
}

export class GroupCommit<T, R> {
  private queue: Waiting<T, R>[] = [];
  private flushing = false;

  constructor(private readonly options: GroupCommitOptions<T, R>) {}

  /** Resolves with the item's result once its batch committed; rejects when its own transaction failed. */
  submit(item: T): Promise<R> {
    return new Promise((done, failed) => {
      this.queue.push({ item, done, failed });
      if (this.flushing) return;
      this.flushing = true;
      // The items submitted in this turn of the event loop join the first batch.
      setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const { maxBatch, log, name } = this.options;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, maxBatch);
      try {
        const results = await this.options.commit(batch.map((entry) => entry.item));
        for (const [i, entry] of batch.entries()) entry.done(results[i]);
      } catch (err) {
        if (batch.length === 1) {
          batch[0].failed(err);
          continue;
        }
        log.warn({ err: (err as Error).message, items: batch.length }, `a batch of ${name} failed; committing one by one`);
        for (const entry of batch) {
          await this.options.commit([entry.item]).then(([result]) => entry.done(result), entry.failed);
        }
      }
    }
    this.flushing = false;
  }
}
