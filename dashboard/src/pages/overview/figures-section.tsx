import { Loaded } from '../../components/loaded';
import { Money } from '../../components/money';
import { Section } from '../../components/section';
import { Link } from '../../router';
import { useSignedIn } from '../../session';
import { useLoad } from '../../use-load';

/**
 * The workspace's money at a glance: the balance, the spend of this calendar month and the
 * requests of today (UTC days, as on the Billing page), each to cents with the exact amount in
 * its title.
 */
export function FiguresSection() {
  const { client } = useSignedIn();
  // This month so far, in UTC days: the usage window that ends today and starts on the 1st.
  const days = new Date().getUTCDate();
  const state = useLoad(
    () => Promise.all([client.get('/v1/billing/balance'), client.get('/v1/billing/usage', { params: { query: { days } } })]),
    [client, days],
  );
  return (
    <Section title="This month">
      <Loaded state={state} what="Loading the balance and the usage">
        {([balance, usage]) => {
          const today = usage.data.at(-1);
          return (
            <>
              <dl className="figures">
                <div className="figure">
                  <dt>Balance</dt>
                  <dd data-testid="overview-balance">
                    <Money amount={balance.balance_usd} currency={balance.currency} rounded />
                  </dd>
                </div>
                <div className="figure">
                  <dt>Spend this month</dt>
                  <dd data-testid="overview-month-spend">
                    <Money amount={usage.total_cost_usd} rounded />
                  </dd>
                </div>
                <div className="figure">
                  <dt>Requests today</dt>
                  <dd data-testid="overview-requests-today">{today?.requests ?? 0}</dd>
                </div>
              </dl>
              <p className="muted">
                Months and days are in UTC. <Link to="/billing">Billing</Link> has the usage per day and tier, and adding funds.
              </p>
            </>
          );
        }}
      </Loaded>
    </Section>
  );
}
