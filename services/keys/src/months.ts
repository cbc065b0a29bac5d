/**
 * Spend is counted per calendar month in UTC (docs/api/keys.md#monthly-spend), keyed by the month itself: the first day
 * of the month, `YYYY-MM-01`, as Postgres `date`. A new month starts at zero because its row does
 * not exist yet; nothing is reset.
 */

/** `YYYY-MM-01` of the UTC month of `at`. */
export function monthOf(at: Date): string {
  return `${at.toISOString().slice(0, 7)}-01`;
}

/** The instant the month of `at` ends and the next one's spend starts (the `resets_at` of a 402). */
export function monthEnd(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
}

/** `YYYY-MM`, the month of a spend alert. */
export const monthLabel = (month: string): string => month.slice(0, 7);
