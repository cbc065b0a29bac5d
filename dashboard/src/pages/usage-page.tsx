import { lazy, Suspense, useMemo, useState } from 'react';
import { Empty } from '../components/empty';
import { Loaded } from '../components/loaded';
import { Loading } from '../components/loading';
import { Money } from '../components/money';
import { Page } from '../components/page';
import { SelectControl } from '../components/select-control';
import { can } from '../permissions';
import { Link } from '../router';
import { useSignedIn } from '../session';
import { useLoad } from '../use-load';
import { CsvDownload } from './usage/csv-download';
import { RecentGenerationsSection } from './usage/recent-generations-section';
import { chartRows, chartSeries, grandTotal, groupTotals, otherGroup, type UsageGroupBy, type UsageMeasure } from './usage/usage-groups';
import { bucketStarts, usagePeriods, usageRange } from './usage/usage-range';
import { UsageTotalsTable } from './usage/usage-totals-table';

// recharts is most of the bundle's weight: loaded on first use, as on the Billing page.
const UsageGroupChart = lazy(() => import('./usage/usage-group-chart').then(({ UsageGroupChart }) => ({ default: UsageGroupChart })));

const groupings: { value: UsageGroupBy; label: string; title: string }[] = [
  { value: 'model', label: 'Model', title: 'Model' },
  { value: 'key', label: 'API key', title: 'Key' },
];

const measures: { value: UsageMeasure; label: string }[] = [
  { value: 'cost', label: 'Cost' },
  { value: 'requests', label: 'Requests' },
];

/**
 * The workspace's usage over a period (`GET /v1/usage`): cost or requests per hour or UTC day,
 * stacked by the model that served or by key; each group's exact totals; the same report as a
 * CSV file; and the latest generations, each linking to its detail.
 */
export function UsagePage() {
  const { client, role, workspace } = useSignedIn();
  const [periodValue, setPeriodValue] = useState('7d');
  const [groupBy, setGroupBy] = useState<UsageGroupBy>('model');
  const [measure, setMeasure] = useState<UsageMeasure>('cost');
  // Bumped by "Refresh": the period ends now again.
  const [refresh, setRefresh] = useState(0);
  const period = usagePeriods.find((candidate) => candidate.value === periodValue) ?? usagePeriods[0];
  // biome-ignore lint/correctness/useExhaustiveDependencies: a refresh moves the period's end to now.
  const range = useMemo(() => usageRange(period, new Date()), [period, refresh]);
  const report = useLoad(async () => {
    const answer = await client.get('/v1/usage', { params: { query: { ...range, group_by: groupBy } } });
    // The operation answers CSV too (format=csv, the download): asked for JSON, JSON it is.
    if (typeof answer === 'string') throw new Error('The usage report came back as text instead of JSON.');
    return answer;
  }, [client, range, groupBy]);

  const readsKeys = can(role, 'keys.read');
  const keys = useLoad(async () => (readsKeys ? (await client.get('/v1/keys', { params: { query: { limit: 100 } } })).data : []), [client, readsKeys]);
  const keyNames = new Map(keys.status === 'done' ? keys.data.map((key) => [key.key_id, key.name]) : []);
  const grouping = groupings.find((candidate) => candidate.value === groupBy) ?? groupings[0];
  const groupName = (name: string) => {
    if (name === otherGroup) return 'Other';
    if (name === '') return groupBy === 'model' ? '(no model)' : '(no key)';
    return groupBy === 'key' ? (keyNames.get(name) ?? name) : name;
  };

  return (
    <Page title="Usage">
      <p>
        What the keys of {workspace.name} used, per {period.bucket === 'hour' ? 'hour' : 'day'} (UTC), by model or by key. Costs are exact, as billed.
      </p>
      <div className="list-controls">
        <SelectControl label="Period" value={period.value} options={usagePeriods.map(({ value, label }) => ({ value, label }))} onChange={setPeriodValue} />
        <SelectControl label="Group by" value={groupBy} options={groupings} onChange={(value) => setGroupBy(value as UsageGroupBy)} />
        <SelectControl label="Chart" value={measure} options={measures} onChange={(value) => setMeasure(value as UsageMeasure)} />
        <button type="button" className="button" onClick={() => setRefresh((n) => n + 1)}>
          Refresh
        </button>
        <CsvDownload range={range} groupBy={groupBy} />
      </div>
      <Loaded state={report} what="Loading the usage">
        {({ data, bucket, start, end }) => {
          const totals = groupTotals(data, groupBy);
          const all = grandTotal(totals);
          if (all.requests === 0) {
            return (
              <Empty title="No usage in this period">
                <p>
                  Model requests made with the workspace's keys show here. Try one in the <Link to="/playground">Playground</Link>.
                </p>
              </Empty>
            );
          }
          const series = chartSeries(totals);
          const rows = chartRows(data, bucketStarts(start, end, bucket === 'hour' ? 'hour' : 'day'), groupBy, series, measure);
          const what = `${measure === 'cost' ? 'Cost' : 'Requests'} per ${bucket === 'hour' ? 'hour' : 'day'}, ${period.label.toLowerCase()}, stacked by ${grouping.title.toLowerCase()}`;
          return (
            <>
              <p>
                <Money amount={all.cost_usd} /> for {all.requests} requests, {period.label.toLowerCase()}.
              </p>
              <Suspense fallback={<Loading what="Loading the chart" />}>
                <UsageGroupChart
                  rows={rows}
                  series={series}
                  seriesLabel={groupName}
                  bucket={bucket === 'hour' ? 'hour' : 'day'}
                  measure={measure}
                  summary={`${what}.`}
                />
              </Suspense>
              <UsageTotalsTable
                totals={totals}
                series={series}
                groupTitle={grouping.title}
                groupLabel={(name) =>
                  groupBy === 'key' && keyNames.has(name) ? (
                    <>
                      {keyNames.get(name)} <code className="muted small">{name}</code>
                    </>
                  ) : (
                    <code>{groupName(name)}</code>
                  )
                }
                caption={`By ${grouping.title.toLowerCase()}, ${period.label.toLowerCase()}`}
              />
            </>
          );
        }}
      </Loaded>
      <RecentGenerationsSection keyNames={keyNames} refresh={refresh} />
    </Page>
  );
}
