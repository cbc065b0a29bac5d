import { Empty } from '../../components/empty';
import { Loaded } from '../../components/loaded';
import { Section } from '../../components/section';
import { Link } from '../../router';
import { useSignedIn } from '../../session';
import { useLoad } from '../../use-load';
import { GenerationsTable } from '../activity/generations-table';

/** The workspace's latest generations, each linking to its detail; the Activity page has them all. */
export function RecentGenerationsSection({ keyNames, refresh }: { keyNames: Map<string, string>; refresh: number }) {
  const { client } = useSignedIn();
  const recent = useLoad(() => client.get('/v1/generations', { params: { query: { limit: 10 } } }), [client, refresh]);
  return (
    <Section title="Recent generations">
      <Loaded state={recent} what="Loading the recent generations">
        {(page) =>
          page.data.length === 0 ? (
            <Empty title="No requests yet">
              <p>
                Requests to <code>/v1/chat/completions</code> with a key of this workspace show here. Try one in the <Link to="/playground">Playground</Link>.
              </p>
            </Empty>
          ) : (
            <>
              <GenerationsTable generations={page.data} keyNames={keyNames} />
              {page.has_more && (
                <p>
                  <Link to="/activity">Every request on the Activity page</Link>
                </p>
              )}
            </>
          )
        }
      </Loaded>
    </Section>
  );
}
