import type { Schemas } from '@switchboard/sdk';
import { Empty } from '../../components/empty';
import { LoadMore } from '../../components/load-more';
import { Loaded } from '../../components/loaded';
import { Money } from '../../components/money';
import { Section } from '../../components/section';
import { formatDateTime } from '../../format';
import { can } from '../../permissions';
import { useSignedIn } from '../../session';
import type { PagesState } from '../../use-pages';
import { safeCheckoutUrl } from './checkout-link';

export type Checkout = Schemas['switchboard.billing.v1.Checkout'];

const statusBadges: Record<string, string> = { completed: 'badge ok', pending: 'badge warn', expired: 'badge bad', failed: 'badge bad' };

export function TopupStatus({ status }: { status: string }) {
  return <span className={statusBadges[status] ?? 'badge'}>{status}</span>;
}

/** The workspace's top-ups, newest first, with their status; a pending one can still be paid. */
export function TopupsSection({ topups }: { topups: PagesState<Checkout> }) {
  const { role } = useSignedIn();
  const mayPay = can(role, 'billing.topup');
  return (
    <Section title="Top-ups">
      <Loaded state={topups} what="Loading the top-ups">
        {(list) =>
          list.length === 0 ? (
            <Empty title="No top-ups yet">{mayPay && <p>Add funds above; each payment is listed here with its status.</p>}</Empty>
          ) : (
            <table className="data-table">
              <thead>
                <tr>
                  <th scope="col">Started</th>
                  <th scope="col">Amount</th>
                  <th scope="col">Status</th>
                  <th scope="col">Credited</th>
                  {mayPay && (
                    <th scope="col">
                      <span className="visually-hidden">Actions</span>
                    </th>
                  )}
                </tr>
              </thead>
              <tbody>
                {list.map((checkout) => {
                  const payUrl = checkout.status === 'pending' ? safeCheckoutUrl(checkout.checkout_url) : undefined;
                  return (
                    <tr key={checkout.checkout_id}>
                      <th scope="row">{formatDateTime(checkout.created_at)}</th>
                      <td>
                        <Money amount={checkout.amount_usd} />
                      </td>
                      <td className="nowrap">
                        <TopupStatus status={checkout.status} />
                      </td>
                      <td>{formatDateTime(checkout.completed_at)}</td>
                      {mayPay && (
                        <td className="actions">
                          {payUrl && (
                            <a href={payUrl}>
                              Pay<span className="visually-hidden"> the top-up of {checkout.amount_usd} USD</span>
                            </a>
                          )}
                        </td>
                      )}
                    </tr>
                  );
                })}
              </tbody>
            </table>
          )
        }
      </Loaded>
      <LoadMore pages={topups} what="top-ups" />
    </Section>
  );
}
