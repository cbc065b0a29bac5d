import { lazy, Suspense, useState } from 'react';
import { Loaded } from '../components/loaded';
import { Loading } from '../components/loading';
import { Page } from '../components/page';
import { Section } from '../components/section';
import { SelectControl } from '../components/select-control';
import { useSignedIn } from '../session';
import { useLoad } from '../use-load';
import { approval, FeedbackTable } from './feedback/feedback-table';

// recharts is most of the bundle's weight and only two pages draw with it: loaded on first use.
const FeedbackChart = lazy(() => import('./feedback/feedback-chart').then(({ FeedbackChart }) => ({ default: FeedbackChart })));

const windows = [7, 30, 90, 365].map((days) => ({ value: String(days), label: `Last ${days} days` }));

/** The ratings of the workspace's generations over a window: in total, per model and per tag. */
export function FeedbackPage() {
  const { client, workspace } = useSignedIn();
  const [days, setDays] = useState(30);
  const summary = useLoad(() => client.get('/v1/feedback/summary', { params: { query: { days } } }), [client, workspace.org_id, days]);
  return (
    <Page title="Feedback">
      <p>
        Thumbs up or down on generations, given with <code>POST /v1/feedback</code>. A rating counts for the model that served the generation, and steers which
        model the service tiers pick.
      </p>
      <SelectControl label="Period" value={String(days)} options={windows} onChange={(value) => setDays(Number(value))} />
      <Loaded state={summary} what="Loading the feedback">
        {(found) => (
          <>
            <Section title="Overview">
              <dl className="facts">
                <dt>Ratings</dt>
                <dd>{found.total}</dd>
                <dt>Thumbs up</dt>
                <dd>{found.thumbs_up}</dd>
                <dt>Thumbs down</dt>
                <dd>{found.thumbs_down}</dd>
                <dt>Approval</dt>
                <dd>{approval(found)}</dd>
              </dl>
            </Section>
            <Section title="By model">
              {Object.keys(found.by_model ?? {}).length > 0 && (
                <Suspense fallback={<Loading what="Loading the chart" />}>
                  <FeedbackChart
                    byModel={found.by_model ?? {}}
                    summary={`Thumbs up and down per model over the last ${found.days} days; the table below has the numbers.`}
                  />
                </Suspense>
              )}
              <FeedbackTable counts={found.by_model ?? {}} keyLabel="Model" empty={`No ratings in the last ${found.days} days`} />
            </Section>
            <Section title="By tag">
              <FeedbackTable counts={found.by_tag ?? {}} keyLabel="Tag" empty={`No tagged ratings in the last ${found.days} days`} />
            </Section>
          </>
        )}
      </Loaded>
    </Page>
  );
}
