import { compareDecimals, sumDecimals } from '../../decimal.js';

/** What the Usage page groups by: the model that served, or the key. */
export type UsageGroupBy = 'model' | 'key';
/** What the chart draws. */
export type UsageMeasure = 'cost' | 'requests';

/** A row of `GET /v1/usage` (UsageReportRow), as far as this page reads it. */
export interface UsageRow {
  bucket_start: string;
  key_id?: string;
  model?: string;
  requests: number;
  input_tokens: number;
  output_tokens: number;
  cost_usd: string;
}

/** One group's totals over the period: the exact cost (a decimal string) and the counts. */
export interface GroupTotal {
  group: string;
  requests: number;
  input_tokens: number;
  output_tokens: number;
  cost_usd: string;
}

/** The chart's series for the groups beyond the largest ones. */
export const otherGroup = 'Other';

/** The group a row belongs to: its model or key id ('' when the API left it out). */
export function groupOf(row: UsageRow, groupBy: UsageGroupBy): string {
  return (groupBy === 'model' ? row.model : row.key_id) ?? '';
}

/** Each group's totals, the most expensive first (then the most requests, then by name). */
export function groupTotals(rows: readonly UsageRow[], groupBy: UsageGroupBy): GroupTotal[] {
  const groups = new Map<string, { requests: number; input_tokens: number; output_tokens: number; costs: string[] }>();
  for (const row of rows) {
    const name = groupOf(row, groupBy);
    const group = groups.get(name) ?? { requests: 0, input_tokens: 0, output_tokens: 0, costs: [] };
    group.requests += row.requests;
    group.input_tokens += row.input_tokens;
    group.output_tokens += row.output_tokens;
    group.costs.push(row.cost_usd);
    groups.set(name, group);
  }
  return [...groups]
    .map(([group, { costs, ...counts }]) => ({ group, ...counts, cost_usd: sumDecimals(costs) }))
    .sort((a, b) => compareDecimals(b.cost_usd, a.cost_usd) || b.requests - a.requests || a.group.localeCompare(b.group));
}

/** The sum of every group's totals. */
export function grandTotal(totals: readonly GroupTotal[]): Omit<GroupTotal, 'group'> {
  return {
    requests: totals.reduce((sum, total) => sum + total.requests, 0),
    input_tokens: totals.reduce((sum, total) => sum + total.input_tokens, 0),
    output_tokens: totals.reduce((sum, total) => sum + total.output_tokens, 0),
    cost_usd: sumDecimals(totals.map((total) => total.cost_usd)),
  };
}

/** The series the chart draws: the `max` largest groups by name, and `Other` for the rest (if any). */
export function chartSeries(totals: readonly GroupTotal[], max = 8): string[] {
  if (totals.length <= max) return totals.map((total) => total.group);
  return [...totals.slice(0, max - 1).map((total) => total.group), otherGroup];
}

/**
 * One chart row per bucket (every bucket of the period, empty ones as zeros): the bucket's start
 * and, per series, the measure as a number for drawing (the exact amounts are in the table).
 */
export function chartRows(
  rows: readonly UsageRow[],
  buckets: readonly string[],
  groupBy: UsageGroupBy,
  series: readonly string[],
  measure: UsageMeasure,
): Array<{ bucket_start: string; values: Record<string, number> }> {
  const named = new Set(series);
  const byBucket = new Map(buckets.map((start) => [start, Object.fromEntries(series.map((name) => [name, 0])) as Record<string, number>]));
  for (const row of rows) {
    const values = byBucket.get(`${new Date(row.bucket_start).toISOString().slice(0, 19)}Z`);
    if (!values) continue;
    const group = groupOf(row, groupBy);
    const name = named.has(group) ? group : otherGroup;
    values[name] = (values[name] ?? 0) + (measure === 'cost' ? Number(row.cost_usd) : row.requests);
  }
  return buckets.map((start) => ({ bucket_start: start, values: byBucket.get(start) ?? {} }));
}
