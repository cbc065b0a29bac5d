import { useEffect, useState } from 'react';
import { Loaded } from '../../components/loaded';
import { Money } from '../../components/money';
import { Section } from '../../components/section';
import { SelectControl } from '../../components/select-control';
import { useSignedIn } from '../../session';
import { useLoad } from '../../use-load';
import { monthLabel, monthOf, recentMonths } from './months';
import { tiers } from './tiers';

/** How many months back the statement's picker offers. */
const monthsOffered = 12;

/**
 * A calendar month's statement (UTC): the balance at its start, what came in, what usage and
 * refunds took, and the balance at its end (now, for the current month). Opening + credits −
 * usage − refunds = closing, exactly: the API's figures are shown as they are.
 * `refreshKey` changes when the page changed the balance: the statement is fetched again.
 */
export function StatementSection({ refreshKey }: { refreshKey: number }) {
  const { client } = useSignedIn();
  const [now] = useState(() => new Date());
  const [month, setMonth] = useState(() => monthOf(now));
  const state = useLoad(() => client.get('/v1/billing/statements/{month}', { params: { path: { month } } }), [client, month]);
  const { reload } = state;
  useEffect(() => {
    if (refreshKey > 0) reload();
  }, [refreshKey, reload]);
  return (
    <Section title="Statement">
      <SelectControl
        label="Month"
        value={month}
        options={recentMonths(now, monthsOffered).map((value) => ({ value, label: monthLabel(value) }))}
        onChange={setMonth}
      />
      <Loaded state={state} what="Loading the statement">
        {(statement) => (
          <>
            <dl className="facts statement" data-testid="statement">
              <dt>Opening balance</dt>
              <dd>
                <Money amount={statement.opening_balance_usd} currency={statement.currency} />
              </dd>
              <dt>Credits</dt>
              <dd>
                <Money amount={statement.credits_usd} currency={statement.currency} />{' '}
                <span className="muted">free credit, top-ups, auto top-ups and adjustments</span>
              </dd>
              <dt>Usage</dt>
              <dd>
                <Money amount={statement.usage_usd} currency={statement.currency} /> <span className="muted">plan fees included</span>
              </dd>
              <dt>Refunds</dt>
              <dd>
                <Money amount={statement.refunds_usd} currency={statement.currency} /> <span className="muted">refunds and lost disputes</span>
              </dd>
              <dt>Closing balance</dt>
              <dd>
                <strong>
                  <Money amount={statement.closing_balance_usd} currency={statement.currency} />
                </strong>
                {statement.month === monthOf(new Date()) && <span className="muted"> so far this month</span>}
              </dd>
            </dl>
            {statement.usage_by_tier_usd && (
              <table className="data-table">
                <caption>Usage by pricing tier, {monthLabel(statement.month)}</caption>
                <thead>
                  <tr>
                    <th scope="col">Tier</th>
                    <th scope="col" className="number">
                      Usage
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {tiers.map((tier) => (
                    <tr key={tier.key}>
                      <th scope="row">{tier.label}</th>
                      <td className="number">
                        <Money amount={statement.usage_by_tier_usd?.[tier.key] ?? '0'} currency={statement.currency} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </>
        )}
      </Loaded>
    </Section>
  );
}
