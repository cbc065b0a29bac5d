/**
 * The periods the Usage page offers and the buckets they are drawn in: hours for up to two days,
 * UTC days beyond. Import-free (unit-tested under Node).
 */

export type Bucket = 'hour' | 'day';

export interface UsagePeriod {
  value: string;
  label: string;
  bucket: Bucket;
  /** How many buckets, the current one included. */
  count: number;
}

export const usagePeriods: UsagePeriod[] = [
  { value: '24h', label: 'Last 24 hours', bucket: 'hour', count: 24 },
  { value: '2d', label: 'Last 2 days', bucket: 'hour', count: 48 },
  { value: '7d', label: 'Last 7 days', bucket: 'day', count: 7 },
  { value: '30d', label: 'Last 30 days', bucket: 'day', count: 30 },
  { value: '90d', label: 'Last 90 days', bucket: 'day', count: 90 },
];

const hourMs = 3_600_000;
const dayMs = 24 * hourMs;

function bucketMs(bucket: Bucket): number {
  return bucket === 'hour' ? hourMs : dayMs;
}

/** The start of the UTC hour or day `at` falls in. */
export function bucketStart(at: Date, bucket: Bucket): Date {
  const step = bucketMs(bucket);
  return new Date(Math.floor(at.getTime() / step) * step);
}

/**
 * The range to ask `GET /v1/usage` for: from the start of the oldest bucket of the period (so
 * every bucket is whole) to `now` (exclusive), both RFC 3339.
 */
export function usageRange(period: UsagePeriod, now: Date): { start: string; end: string; bucket: Bucket } {
  const start = new Date(bucketStart(now, period.bucket).getTime() - (period.count - 1) * bucketMs(period.bucket));
  return { start: start.toISOString(), end: now.toISOString(), bucket: period.bucket };
}

/** Every bucket's start from `start` up to `end` (exclusive), as RFC 3339 strings without milliseconds (as the API writes them). */
export function bucketStarts(start: string, end: string, bucket: Bucket): string[] {
  const step = bucketMs(bucket);
  const last = new Date(end).getTime();
  const starts: string[] = [];
  for (let at = bucketStart(new Date(start), bucket).getTime(); at < last; at += step) starts.push(rfc3339(new Date(at)));
  return starts;
}

/** `2026-11-24T14:00:00Z`: the same instant compares equal however the API wrote it. */
export function rfc3339(date: Date): string {
  return `${date.toISOString().slice(0, 19)}Z`;
}

/** A bucket's label on the chart's axis: "Nov 24" for a day, "Nov 24, 14:00" for an hour (UTC). */
export function bucketLabel(bucketStartValue: string, bucket: Bucket): string {
  const date = new Date(bucketStartValue);
  const day = date.toLocaleDateString('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });
  return bucket === 'day' ? day : `${day}, ${date.toISOString().slice(11, 16)}`;
}

/** The CSV file's name: `usage-by-model-2026-11-01-2026-11-24.csv`. */
export function csvFilename(groupBy: string, start: string, end: string): string {
  return `usage-by-${groupBy}-${start.slice(0, 10)}-${end.slice(0, 10)}.csv`;
}
