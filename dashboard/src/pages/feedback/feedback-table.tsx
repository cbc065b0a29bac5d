import type { Schemas } from '@switchboard/sdk';
import { Empty } from '../../components/empty';
import { TableHead } from '../../components/table-head';

export type FeedbackCounts = Schemas['switchboard.conversations.v1.FeedbackCounts'];

/** The share of thumbs up, as a whole percentage ('—' without ratings). */
export function approval(counts: FeedbackCounts): string {
  return counts.total === 0 ? '—' : `${Math.round((counts.thumbs_up / counts.total) * 100)}%`;
}

/** Rating counts per key (a tag or a model), the most rated first. */
export function FeedbackTable({ counts, keyLabel, empty }: { counts: Record<string, FeedbackCounts>; keyLabel: string; empty: string }) {
  const rows = Object.entries(counts).sort(([a, x], [b, y]) => y.total - x.total || a.localeCompare(b));
  if (rows.length === 0) return <Empty title={empty} />;
  return (
    <table className="data-table">
      <TableHead
        columns={[
          keyLabel,
          { title: 'Ratings', number: true },
          { title: 'Thumbs up', number: true },
          { title: 'Thumbs down', number: true },
          { title: 'Approval', number: true },
        ]}
      />
      <tbody>
        {rows.map(([key, row]) => (
          <tr key={key}>
            <th scope="row">
              <code>{key}</code>
            </th>
            <td className="number">{row.total}</td>
            <td className="number">{row.thumbs_up}</td>
            <td className="number">{row.thumbs_down}</td>
            <td className="number">{approval(row)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
