import { Bar, BarChart, CartesianGrid, Legend, Tooltip, XAxis, YAxis } from 'recharts';
import type { FeedbackCounts } from './feedback-table';

/** Thumbs up and down per model, stacked; the table beside it has the same numbers for screen readers. */
export function FeedbackChart({ byModel, summary }: { byModel: Record<string, FeedbackCounts>; summary: string }) {
  const rows = Object.entries(byModel)
    .sort(([, x], [, y]) => y.total - x.total)
    .map(([model, counts]) => ({ model, up: counts.thumbs_up, down: counts.thumbs_down }));
  return (
    <figure className="feedback-chart">
      <BarChart
        responsive
        data={rows}
        layout="vertical"
        style={{ width: '100%', height: Math.max(120, rows.length * 44 + 60) }}
        margin={{ top: 8, right: 16, bottom: 0, left: 8 }}
        title={summary}
      >
        <CartesianGrid strokeDasharray="3 3" horizontal={false} />
        <XAxis type="number" allowDecimals={false} />
        <YAxis type="category" dataKey="model" width={160} />
        <Tooltip />
        <Legend />
        <Bar dataKey="up" name="Thumbs up" stackId="rating" fill="#116329" isAnimationActive={false} />
        <Bar dataKey="down" name="Thumbs down" stackId="rating" fill="#b42318" isAnimationActive={false} />
      </BarChart>
      <figcaption className="visually-hidden">{summary}</figcaption>
    </figure>
  );
}
