import { ConfigError, parseDuration } from '@switchboard/runtime/config';

/** docs/webhooks.md#deliveries-retries-and-their-schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h. */
export const defaultRetrySchedule = '5s,5m,30m,2h,5h,10h,10h';

/**
 * When to try a delivery again. N delays allow N + 1 scheduled attempts; each delay gets ±20%
 * jitter so that receivers coming back are not hit by every retry at once.
 */
export class RetrySchedule {
  constructor(
    readonly delaysMs: number[],
    private readonly random: () => number = Math.random,
  ) {}

  /** WEBHOOK_RETRY_SCHEDULE: comma-separated durations (`ms` allowed, e.g. `50ms,100ms`). */
  static parse(raw: string, variable = 'WEBHOOK_RETRY_SCHEDULE'): RetrySchedule {
    if (raw.trim() === '') return new RetrySchedule([]);
    return new RetrySchedule(
      raw
        .split(',')
        .map((entry) => entry.trim())
        .map((entry, index) => {
          try {
            return parseDuration(entry);
          } catch {
            throw new ConfigError(`${variable}, entry ${index + 1}: ${JSON.stringify(entry)} is not a duration such as 5s, 5m, 2h or 50ms`);
          }
        }),
    );
  }

  /**
   * The delay after the `attempt`-th scheduled attempt failed, or undefined when it was the last.
   * A `Retry-After` (429/503) is honoured within [1×, 2×] of the scheduled delay.
   */
  delayAfter(attempt: number, retryAfterMs?: number): number | undefined {
    const base = this.delaysMs[attempt - 1];
    if (base === undefined) return undefined;
    const jittered = base * (0.8 + 0.4 * this.random());
    if (retryAfterMs === undefined) return Math.round(jittered);
    return Math.round(Math.min(Math.max(retryAfterMs, jittered), 2 * jittered));
  }
}
