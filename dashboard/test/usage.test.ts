import { describe, expect, it } from 'vitest';
import { sumDecimals } from '../src/decimal.js';
import { chartRows, chartSeries, grandTotal, groupTotals, otherGroup } from '../src/pages/usage/usage-groups.js';
import { bucketLabel, bucketStarts, csvFilename, usagePeriods, usageRange } from '../src/pages/usage/usage-range.js';

describe('sumDecimals', () => {
  it('adds decimal strings exactly, to the longest fraction', () => {
    expect(sumDecimals(['0.0003', '0.21'])).toBe('0.2103');
    expect(sumDecimals(['0.1', '0.2'])).toBe('0.3');
    expect(sumDecimals(['12', '0.000000001'])).toBe('12.000000001');
    expect(sumDecimals(['-1.5', '1'])).toBe('-0.5');
    expect(sumDecimals([])).toBe('0');
  });
});

describe('the usage periods', () => {
  const now = new Date('2026-11-26T10:42:17.123Z');
  const period = (value: string) => usagePeriods.find((candidate) => candidate.value === value)!;

  it('counts whole UTC days back from today, and hours for the short ones', () => {
    expect(usageRange(period('7d'), now)).toEqual({ start: '2026-11-20T00:00:00.000Z', end: '2026-11-26T10:42:17.123Z', bucket: 'day' });
    expect(usageRange(period('24h'), now)).toEqual({ start: '2026-11-25T11:00:00.000Z', end: '2026-11-26T10:42:17.123Z', bucket: 'hour' });
    const { start, end, bucket } = usageRange(period('90d'), now);
    expect(bucketStarts(start, end, bucket)).toHaveLength(90);
    const hours = usageRange(period('2d'), now);
    expect(bucketStarts(hours.start, hours.end, hours.bucket)).toHaveLength(48);
  });

  it('labels buckets in UTC and names the CSV after the grouping and dates', () => {
    expect(bucketLabel('2026-11-24T00:00:00Z', 'day')).toBe('Nov 24');
    expect(bucketLabel('2026-11-24T14:00:00Z', 'hour')).toBe('Nov 24, 14:00');
    expect(csvFilename('model', '2026-11-20T00:00:00.000Z', '2026-11-26T10:42:17.123Z')).toBe('usage-by-model-2026-11-20-2026-11-26.csv');
  });
});

describe('the usage groups', () => {
  const row = (bucket_start: string, model: string, requests: number, cost_usd: string) => ({
    bucket_start,
    model,
    requests,
    input_tokens: requests * 10,
    output_tokens: requests * 2,
    cost_usd,
  });
  const rows = [
    row('2026-11-24T00:00:00Z', 'small', 3, '0.0003'),
    row('2026-11-24T00:00:00Z', 'large', 1, '0.21'),
    row('2026-11-25T00:00:00.000Z', 'small', 2, '0.0002'),
  ];

  it('sums each group exactly, the most expensive first, and the total of them all', () => {
    const totals = groupTotals(rows, 'model');
    expect(totals).toEqual([
      { group: 'large', requests: 1, input_tokens: 10, output_tokens: 2, cost_usd: '0.21' },
      { group: 'small', requests: 5, input_tokens: 50, output_tokens: 10, cost_usd: '0.0005' },
    ]);
    expect(grandTotal(totals)).toEqual({ requests: 6, input_tokens: 60, output_tokens: 12, cost_usd: '0.2105' });
  });

  it('draws every bucket, empty ones as zeros, and folds the smallest groups into Other', () => {
    const buckets = ['2026-11-23T00:00:00Z', '2026-11-24T00:00:00Z', '2026-11-25T00:00:00Z'];
    expect(chartRows(rows, buckets, 'model', ['large', 'small'], 'requests').map((r) => r.values)).toEqual([
      { large: 0, small: 0 },
      { large: 1, small: 3 },
      { large: 0, small: 2 },
    ]);
    const many = Array.from({ length: 10 }, (_, i) => ({ group: `m${i}`, requests: 1, input_tokens: 0, output_tokens: 0, cost_usd: '1' }));
    expect(chartSeries(many, 8)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', otherGroup]);
    expect(chartRows(rows, buckets, 'model', ['large', otherGroup], 'cost')[1].values).toEqual({ large: 0.21, [otherGroup]: 0.0003 });
  });
});
