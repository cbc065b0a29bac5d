import type { Schemas } from '@switchboard/sdk';
import { ConfirmAction } from '../../components/confirm-action';
import { Empty } from '../../components/empty';
import { Loaded } from '../../components/loaded';
import { Section } from '../../components/section';
import { TableHead } from '../../components/table-head';
import { formatDate } from '../../format';
import { can } from '../../permissions';
import { useSignedIn } from '../../session';
import type { LoadState } from '../../use-load';
import { AddCard } from './add-card';
import { cardExpiry, cardLabel } from './ledger-words';

export type PaymentMethod = Schemas['switchboard.billing.v1.PaymentMethod'];

/**
 * The workspace's saved cards, newest first; the newest is the default, the one auto top-up
 * charges. Owners and admins add a card (on the provider's page) and remove one; removing the
 * last switches auto top-up off.
 */
export function PaymentMethodsSection({ methods, onChange }: { methods: LoadState<{ data: PaymentMethod[] }>; onChange(): void }) {
  const { client, role, workspace } = useSignedIn();
  const mayManage = can(role, 'billing.manage');
  return (
    <Section title="Payment methods">
      <Loaded state={methods} what="Loading the saved cards">
        {({ data }) =>
          data.length === 0 ? (
            <Empty title="No saved cards">
              <p>
                {mayManage
                  ? 'Save a card to let auto top-up charge it when the balance runs low. Nothing is charged when you save it.'
                  : `The owner or an admin of ${workspace.name} can save a card for auto top-up.`}
              </p>
            </Empty>
          ) : (
            <table className="data-table">
              <TableHead columns={['Card', 'Expires', 'Saved', 'Auto top-up']} actions={mayManage ? 'Actions' : undefined} />
              <tbody>
                {data.map((method) => {
                  const name = cardLabel(method.brand, method.last4);
                  return (
                    <tr key={method.payment_method_id}>
                      <th scope="row">{name}</th>
                      <td>{cardExpiry(method.exp_month, method.exp_year)}</td>
                      <td>{formatDate(method.created_at)}</td>
                      <td>{method.default ? <span className="badge ok">Default</span> : <span className="muted">—</span>}</td>
                      {mayManage && (
                        <td className="actions">
                          <ConfirmAction
                            label="Remove"
                            target={name}
                            question={
                              data.length === 1
                                ? `Remove ${name}? It is the only saved card: auto top-up, if on, is switched off with it.`
                                : method.default
                                  ? `Remove ${name}? Auto top-up then charges the next newest card.`
                                  : `Remove ${name}?`
                            }
                            onConfirm={async () => {
                              await client.delete('/v1/billing/payment-methods/{payment_method_id}', {
                                params: { path: { payment_method_id: method.payment_method_id } },
                              });
                              onChange();
                            }}
                          />
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
      {mayManage && <AddCard />}
    </Section>
  );
}
