/** A calendar month of the API's statements: `YYYY-MM`, in UTC (billing.proto, GetStatement). */

/** The UTC month `now` falls in, `YYYY-MM`. */
export function monthOf(now: Date): string {
  return `${now.getUTCFullYear()}-${String(now.getUTCMonth() + 1).padStart(2, '0')}`;
}

/** The `count` months up to the one `now` falls in (UTC), newest first: the months a statement can be asked for. */
export function recentMonths(now: Date, count: number): string[] {
  const months: string[] = [];
  for (let back = 0; back < count; back++) months.push(monthOf(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - back, 1))));
  return months;
}

/** `2026-11` as the reader's locale names it (`November 2026`); not a month: given back unchanged. */
export function monthLabel(month: string, locale?: string): string {
  const match = /^(\d{4})-(\d{2})$/.exec(month);
  if (!match) return month;
  const date = new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, 1));
  return date.toLocaleDateString(locale, { month: 'long', year: 'numeric', timeZone: 'UTC' });
}
