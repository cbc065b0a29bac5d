import type { Schemas } from '@switchboard/sdk';
import { Empty } from '../../components/empty';
import { LoadMore } from '../../components/load-more';
import { Loaded } from '../../components/loaded';
import { Money } from '../../components/money';
import { Section } from '../../components/section';
import { TableHead } from '../../components/table-head';
import { formatDateTime } from '../../format';
import type { PagesState } from '../../use-pages';
import { ledgerTypeLabel, usageReferenceLabel } from './ledger-words';

export type LedgerEntry = Schemas['switchboard.billing.v1.LedgerEntry'];

/** Entries per page of the ledger. */
export const ledgerPageSize = 10;

/**
 * Every change of the balance, newest first, each with the balance right after it: credits,
 * usage (one entry per UTC day and tier, growing through the day), refunds, lost disputes.
 */
export function LedgerSection({ ledger }: { ledger: PagesState<LedgerEntry> }) {
  return (
    <Section title="Ledger">
      <Loaded state={ledger} what="Loading the ledger">
        {(entries) =>
          entries.length === 0 ? (
            <Empty title="No balance changes yet">
              <p>Credits, top-ups, usage and refunds are listed here as they change the balance.</p>
            </Empty>
          ) : (
            <table className="data-table" data-testid="ledger">
              <TableHead columns={['Date', 'Type', { title: 'Amount', number: true }, { title: 'Balance after', number: true }, 'Reference']} />
              <tbody>
                {entries.map((entry) => {
                  const usage = usageReferenceLabel(entry.reference);
                  return (
                    <tr key={entry.entry_id}>
                      <th scope="row">{formatDateTime(entry.occurred_at)}</th>
                      <td>{ledgerTypeLabel(entry.type)}</td>
                      <td className="number">
                        <Money amount={entry.amount_usd} signed />
                      </td>
                      <td className="number">
                        <Money amount={entry.balance_after_usd} />
                      </td>
                      <td>{usage ?? <code>{entry.reference}</code>}</td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          )
        }
      </Loaded>
      <LoadMore pages={ledger} what="entries" />
    </Section>
  );
}
