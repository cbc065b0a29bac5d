/**
 * The periods of a budget (docs/api/keys.md#periodic-budgets), in UTC: a day, a week starting
 * Monday, a calendar month, and `total`, which never resets. Spend is keyed by the period's first
 * day (`YYYY-MM-DD`, Postgres `date`), so a new period starts at zero because its row does not
 * exist yet: nothing is reset. `total` is keyed by 1970-01-01.
 */

export const periods = ['day', 'week', 'month', 'total'] as const;
export type Period = (typeof periods)[number];

export const isPeriod = (value: string): value is Period => (periods as readonly string[]).includes(value);

const day = (at: Date) => Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate());
const dayMs = 86_400_000;

/** The first instant of the period of `at`. */
export function periodStartAt(period: Period, at: Date): Date {
  switch (period) {
    case 'day':
      return new Date(day(at));
    case 'week':
      // getUTCDay: Sunday 0 … Saturday 6; weeks start Monday.
      return new Date(day(at) - ((at.getUTCDay() + 6) % 7) * dayMs);
    case 'month':
      return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
    case 'total':
      return new Date(0);
  }
}

/** `YYYY-MM-DD`: the key of the period of `at` in the spend tables. */
export const periodStart = (period: Period, at: Date): string => periodStartAt(period, at).toISOString().slice(0, 10);

/** When the period of `at` ends and the next one's spend starts (the `resets_at` of a 402); null for total. */
export function periodEnd(period: Period, at: Date): Date | null {
  const start = periodStartAt(period, at);
  switch (period) {
    case 'day':
      return new Date(start.getTime() + dayMs);
    case 'week':
      return new Date(start.getTime() + 7 * dayMs);
    case 'month':
      return new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1));
    case 'total':
      return null;
  }
}
