import { lazy, Suspense, useState } from 'react';
import { Empty } from '../../components/empty';
import { Loaded } from '../../components/loaded';
import { Loading } from '../../components/loading';
import { Money } from '../../components/money';
import { Section } from '../../components/section';
import { SelectControl } from '../../components/select-control';
import { useSignedIn } from '../../session';
import { useLoad } from '../../use-load';
import { tiers } from './tiers';

// recharts is most of the bundle's weight and only two pages draw with it: loaded on first use.
const UsageChart = lazy(() => import('./usage-chart').then(({ UsageChart }) => ({ default: UsageChart })));

const windows = [7, 30, 90];

/** Usage over the last days: the cost of each day stacked by tier, and the window's totals per tier. */
export function UsageSection() {
  const { client } = useSignedIn();
  const [days, setDays] = useState(30);
  const state = useLoad(
    () =>
      Promise.all([client.get('/v1/billing/usage', { params: { query: { days } } }), client.get('/v1/billing/usage/by-tier', { params: { query: { days } } })]),
    [client, days],
  );
  return (
    <Section title="Usage">
      <SelectControl
        label="Period"
        value={String(days)}
        options={windows.map((count) => ({ value: String(count), label: `Last ${count} days` }))}
        onChange={(value) => setDays(Number(value))}
      />
      <Loaded state={state} what="Loading the usage">
        {([usage, { by_tier }]) => {
          const requests = usage.data.reduce((sum, day) => sum + day.requests, 0);
          const used = usage.data.filter((day) => day.requests > 0);
          return (
            <>
              <p>
                <Money amount={usage.total_cost_usd} /> over the last {usage.days} days (UTC, today included), {requests} requests.
              </p>
              {requests === 0 ? (
                <Empty title="No usage in this period">
                  <p>Model requests made with the workspace's keys show here, per day and per pricing tier.</p>
                </Empty>
              ) : (
                <Suspense fallback={<Loading what="Loading the chart" />}>
                  <UsageChart days={usage.data} summary={`Cost per day over the last ${usage.days} days, stacked by pricing tier.`} />
                </Suspense>
              )}
              <table className="data-table">
                <caption>By pricing tier, last {usage.days} days</caption>
                <thead>
                  <tr>
                    <th scope="col">Tier</th>
                    <th scope="col">Requests</th>
                    <th scope="col">Cost</th>
                  </tr>
                </thead>
                <tbody>
                  {tiers.map((tier) => (
                    <tr key={tier.key}>
                      <th scope="row">
                        <span className="swatch" style={{ background: tier.color }} aria-hidden="true" /> {tier.label}
                        <div className="muted small">{tier.description}</div>
                      </th>
                      <td>{by_tier[tier.key].requests}</td>
                      <td>
                        <Money amount={by_tier[tier.key].cost_usd} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
              {used.length > 0 && (
                <details className="day-table">
                  <summary>Each day's numbers</summary>
                  <table className="data-table">
                    <thead>
                      <tr>
                        <th scope="col">Day (UTC)</th>
                        <th scope="col">Requests</th>
                        <th scope="col">Input tokens</th>
                        <th scope="col">Output tokens</th>
                        <th scope="col">Cost</th>
                      </tr>
                    </thead>
                    <tbody>
                      {used.map((day) => (
                        <tr key={day.date}>
                          <th scope="row">{day.date}</th>
                          <td>{day.requests}</td>
                          <td>{day.input_tokens}</td>
                          <td>{day.output_tokens}</td>
                          <td>
                            <Money amount={day.cost_usd} />
                          </td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                  <p className="hint">Days without usage are left out.</p>
                </details>
              )}
            </>
          );
        }}
      </Loaded>
    </Section>
  );
}
