import type { ReactNode } from 'react';
import { Money } from '../../components/money';
import { TableHead } from '../../components/table-head';
import { seriesColor } from './series-colors';
import { type GroupTotal, grandTotal, otherGroup } from './usage-groups';

/**
 * Each group's totals over the period, exact (the API's decimals summed as decimals), with the
 * colour of its series in the chart and the sum of them all.
 */
export function UsageTotalsTable({
  totals,
  series,
  groupTitle,
  groupLabel,
  caption,
}: {
  totals: GroupTotal[];
  series: string[];
  groupTitle: string;
  groupLabel(name: string): ReactNode;
  caption: string;
}) {
  const all = grandTotal(totals);
  const colorOf = (group: string) => {
    const index = series.indexOf(group);
    return index >= 0 ? seriesColor(group, index) : seriesColor(otherGroup, series.length - 1);
  };
  return (
    <table className="data-table usage-totals">
      <caption>{caption}</caption>
      <TableHead
        columns={[
          groupTitle,
          { title: 'Requests', number: true },
          { title: 'Input tokens', number: true },
          { title: 'Output tokens', number: true },
          { title: 'Cost', number: true },
        ]}
      />
      <tbody>
        {totals.map((total) => (
          <tr key={total.group}>
            <th scope="row">
              <span className="swatch" style={{ background: colorOf(total.group) }} aria-hidden="true" /> {groupLabel(total.group)}
            </th>
            <td className="number">{total.requests}</td>
            <td className="number">{total.input_tokens}</td>
            <td className="number">{total.output_tokens}</td>
            <td className="number">
              <Money amount={total.cost_usd} />
            </td>
          </tr>
        ))}
      </tbody>
      <tfoot>
        <tr>
          <th scope="row">Total</th>
          <td className="number">{all.requests}</td>
          <td className="number">{all.input_tokens}</td>
          <td className="number">{all.output_tokens}</td>
          <td className="number">
            <Money amount={all.cost_usd} />
          </td>
        </tr>
      </tfoot>
    </table>
  );
}
