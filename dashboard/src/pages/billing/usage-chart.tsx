import type { Schemas } from '@switchboard/sdk';
import { Bar, BarChart, CartesianGrid, Legend, Tooltip, XAxis, YAxis } from 'recharts';
import { Money } from '../../components/money';
import { tiers } from './tiers';

type UsageDay = Schemas['switchboard.billing.v1.UsageDay'];

interface ChartRow {
  day: UsageDay;
  label: string;
  fast: number;
  balanced: number;
  passthrough: number;
  byok: number;
}

const axisMoney = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', maximumSignificantDigits: 3 });

/** "2026-11-24" → "Nov 24", read as a UTC day. */
function dayLabel(date: string): string {
  return new Date(`${date}T00:00:00Z`).toLocaleDateString(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });
}

/** The hovered day with its exact amounts (the bars are drawn from numbers, the text is the API's decimals). */
function DayTooltip({ active, payload }: { active?: boolean; payload?: ReadonlyArray<{ payload?: unknown }> }) {
  const row = payload?.[0]?.payload as ChartRow | undefined;
  if (!active || !row) return null;
  return (
    <div className="chart-tooltip">
      <p>
        <strong>{dayLabel(row.day.date)}</strong>: <Money amount={row.day.cost_usd} />, {row.day.requests} requests
      </p>
      <ul>
        {tiers.map((tier) => (
          <li key={tier.key}>
            {tier.label}: <Money amount={row.day.by_tier[tier.key].cost_usd} />
          </li>
        ))}
      </ul>
    </div>
  );
}

/**
 * The cost of each day, stacked by pricing tier. The amounts become numbers here for drawing
 * only; the tooltip, the table under the chart and the totals show the API's decimal strings.
 */
export function UsageChart({ days, summary }: { days: UsageDay[]; summary: string }) {
  const rows: ChartRow[] = days.map((day) => ({
    day,
    label: dayLabel(day.date),
    fast: Number(day.by_tier.fast.cost_usd),
    balanced: Number(day.by_tier.balanced.cost_usd),
    passthrough: Number(day.by_tier.passthrough.cost_usd),
    byok: Number(day.by_tier.byok.cost_usd),
  }));
  return (
    <figure className="usage-chart">
      <BarChart responsive data={rows} style={{ width: '100%', height: 280 }} margin={{ top: 8, right: 16, bottom: 8, left: 8 }} title={summary}>
        <CartesianGrid strokeDasharray="3 3" vertical={false} />
        <XAxis dataKey="label" tickLine={false} minTickGap={12} interval="preserveStartEnd" />
        {/* Ticks are round numbers of the drawing, never an amount billed: three significant digits are enough, and "auto" sizes the axis to its longest label. */}
        <YAxis tickFormatter={(value: number) => axisMoney.format(value)} width="auto" allowDecimals />
        <Tooltip content={DayTooltip} />
        {/* The tiers in their own order (fast to byok), as in the table, not sorted by name. */}
        <Legend itemSorter={null} />
        {tiers.map((tier) => (
          <Bar key={tier.key} dataKey={tier.key} name={tier.label} stackId="cost" fill={tier.color} isAnimationActive={false} />
        ))}
      </BarChart>
      <figcaption className="visually-hidden">{summary}</figcaption>
    </figure>
  );
}
