import { Bar, BarChart, CartesianGrid, Legend, Tooltip, XAxis, YAxis } from 'recharts';
import { seriesColor } from './series-colors';
import type { UsageMeasure } from './usage-groups';
import { type Bucket, bucketLabel } from './usage-range';

export interface UsageChartRow {
  bucket_start: string;
  values: Record<string, number>;
}

const axisMoney = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', maximumSignificantDigits: 3 });

/**
 * The cost (or requests) of each bucket, stacked by group (model or key). The amounts are
 * numbers here for drawing only: the table under the chart shows the API's exact decimals.
 */
export function UsageGroupChart({
  rows,
  series,
  seriesLabel,
  bucket,
  measure,
  summary,
}: {
  rows: UsageChartRow[];
  series: string[];
  seriesLabel(name: string): string;
  bucket: Bucket;
  measure: UsageMeasure;
  summary: string;
}) {
  const data = rows.map((row) => ({ ...row, label: bucketLabel(row.bucket_start, bucket) }));
  const format = (value: number) => (measure === 'cost' ? axisMoney.format(value) : String(value));
  return (
    <figure className="usage-chart">
      <BarChart responsive data={data} style={{ width: '100%', height: 300 }} margin={{ top: 8, right: 16, bottom: 8, left: 8 }} title={summary}>
        <CartesianGrid strokeDasharray="3 3" vertical={false} />
        <XAxis dataKey="label" tickLine={false} minTickGap={12} interval="preserveStartEnd" />
        <YAxis tickFormatter={format} width="auto" allowDecimals={measure === 'cost'} />
        <Tooltip formatter={(value) => (typeof value === 'number' ? format(value) : String(value))} />
        <Legend itemSorter={null} />
        {series.map((name, index) => (
          // A function, not a string: a model id's dots would be read as a path into the row.
          <Bar
            key={name}
            dataKey={(row: UsageChartRow) => row.values[name] ?? 0}
            name={seriesLabel(name)}
            stackId="usage"
            fill={seriesColor(name, index)}
            isAnimationActive={false}
          />
        ))}
      </BarChart>
      <figcaption className="visually-hidden">{summary}</figcaption>
    </figure>
  );
}
