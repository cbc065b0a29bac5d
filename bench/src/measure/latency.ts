export const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

/** The `p`th percentile of ascending `sorted` values as they are (NaN when empty). */
export function percentileOf(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.max(0, Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** The `p`th percentile of ascending `sorted` values, rounded to 2 decimals (0 when empty). */
export function percentile(sorted: Float64Array, p: number): number {
  return sorted.length === 0 ? 0 : round(percentileOf(sorted, p));
}

export interface Latency {
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** p50, p90, p99 and max of latencies in any order, in ms rounded to 2 decimals. */
export function latencyOf(values: ArrayLike<number>): Latency {
  const sorted = Float64Array.from(values).sort();
  return { p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: percentile(sorted, 100) };
}
