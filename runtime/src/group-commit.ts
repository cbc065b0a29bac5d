import type { Logger } from './log.js';

/**
 * Group commit: work submitted while a transaction runs goes together into the next one, so a
 * busy writer pays one transaction (and its round trips and WAL flush) per batch rather than
 * per item, and an idle one still commits an item at once (no timer, no added wait). Each
 * submitter learns its own result only once its batch committed.
 *
 * When a batch fails, its items are committed each alone, side by side: an item the database
 * refuses (or a lock timeout) must not cost the others theirs, each caller gets its own error,
 * and when the database is away every caller learns it within one attempt's time rather than
 * after the whole batch's, one after the other. A single item touches its own rows only, so the
 * singles never wait on each other in a cycle.
 */
export interface GroupCommitOptions<T, R> {
  /** What the log lines say is committed ("webhook outcomes"). */
  name: string;
  log: Logger;
  /** Items committed in one transaction at most; the rest wait for the next. */
  maxBatch: number;
  /**
   * Transactions at once (default 1). Two let a batch start while the last one commits (its WAL
   * flush), which halves the wait of a call at moderate load; only for commits that commute.
   */
  concurrency?: number;
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
  private running = 0;
  private scheduled = false;

  constructor(private readonly options: GroupCommitOptions<T, R>) {}

  /** Resolves with the item's result once its batch committed; rejects when its own transaction failed. */
  submit(item: T): Promise<R> {
    return new Promise((done, failed) => {
      this.queue.push({ item, done, failed });
      this.schedule();
    });
  }

  /** Starts batches on the next turn of the event loop, so the items submitted in this one join them. */
  private schedule(): void {
    if (this.scheduled || this.running >= (this.options.concurrency ?? 1)) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    while (this.queue.length > 0 && this.running < (this.options.concurrency ?? 1)) {
      const batch = this.queue.splice(0, this.options.maxBatch);
      this.running += 1;
      void this.commit(batch).finally(() => {
        this.running -= 1;
        if (this.queue.length > 0) this.schedule();
      });
    }
  }

  private async commit(batch: Waiting<T, R>[]): Promise<void> {
    try {
      const results = await this.options.commit(batch.map((entry) => entry.item));
      for (const [i, entry] of batch.entries()) entry.done(results[i]);
    } catch (err) {
      if (batch.length === 1) {
        batch[0].failed(err);
        return;
      }
      this.options.log.warn({ err: (err as Error).message, items: batch.length }, `a batch of ${this.options.name} failed; committing each alone`);
      await Promise.all(batch.map((entry) => this.options.commit([entry.item]).then(([result]) => entry.done(result), entry.failed)));
    }
  }
}
