import type { ReactNode } from 'react';
import { Loaded } from '../components/loaded';
import { Money } from '../components/money';
import { Page } from '../components/page';
import { Section } from '../components/section';
import { formatDateTime } from '../format';
import { can } from '../permissions';
import { Link } from '../router';
import { useSignedIn } from '../session';
import { useLoad } from '../use-load';
import { feedbackText, statuses } from './activity/generations-table';

/** A measured duration: `803 ms`, `0.912 ms`; '—' when the data plane did not report it. */
function duration(ms: number | null): string {
  return ms === null ? '—' : `${ms} ms`;
}

function Fact({ term, children }: { term: string; children: ReactNode }) {
  return (
    <>
      <dt>{term}</dt>
      <dd>{children}</dd>
    </>
  );
}

/**
 * One generation (`GET /v1/generations/{id}`), every field of it: what was asked for and what
 * served it, tokens, the charged and the provider's cost, how the answer ended, its timings, the
 * conversation it was stored in and the feedback given on it.
 */
export function GenerationPage({ params }: { params: Record<string, string> }) {
  const { client, role } = useSignedIn();
  const generationId = params.generationId;
  const generation = useLoad(
    () => client.get('/v1/generations/{generation_id}', { params: { path: { generation_id: generationId } } }),
    [client, generationId],
  );
  const readsKeys = can(role, 'keys.read');
  const readsConversations = can(role, 'conversations.read');
  const key = useLoad(
    async () =>
      readsKeys && generation.status === 'done'
        ? client.get('/v1/keys/{key_id}', { params: { path: { key_id: generation.data.key_id } } }).catch(() => undefined)
        : undefined,
    [client, readsKeys, generation.status],
  );
  return (
    <Page title="Generation">
      <p>
        <Link to="/usage">Usage</Link> · <Link to="/activity">Activity</Link>
      </p>
      <Loaded state={generation} what="Loading the generation">
        {(found) => {
          const status = found.status === null ? undefined : (statuses[found.status] ?? { label: found.status, badge: 'badge' });
          const keyName = key.status === 'done' ? key.data?.name : undefined;
          return (
            <>
              <Section title="Request">
                <dl className="facts" data-testid="generation-request">
                  <Fact term="Generation id">
                    <code>{found.generation_id}</code>
                  </Fact>
                  <Fact term="Created">{formatDateTime(found.created_at)}</Fact>
                  <Fact term="Key">
                    {readsKeys ? <Link to={`/keys/${encodeURIComponent(found.key_id)}`}>{keyName ?? found.key_id}</Link> : found.key_id}
                    {keyName && (
                      <>
                        {' '}
                        <code className="muted small">{found.key_id}</code>
                      </>
                    )}
                  </Fact>
                  <Fact term="Model requested">
                    <code>{found.model}</code>
                  </Fact>
                  <Fact term="Model that served">
                    <code>{found.routed_model}</code>
                  </Fact>
                  <Fact term="Tier">{found.tier}</Fact>
                  <Fact term="Region">{found.region ?? '—'}</Fact>
                  <Fact term="Streamed">{found.streamed === null ? '—' : found.streamed ? 'Yes' : 'No'}</Fact>
                  <Fact term="Conversation">
                    {found.conversation_id === null ? (
                      '—'
                    ) : readsConversations ? (
                      <Link to={`/conversations/${encodeURIComponent(found.conversation_id)}`}>
                        <code>{found.conversation_id}</code>
                      </Link>
                    ) : (
                      <code>{found.conversation_id}</code>
                    )}
                  </Fact>
                </dl>
              </Section>
              <Section title="Tokens and cost">
                <dl className="facts" data-testid="generation-cost">
                  <Fact term="Input tokens">{found.input_tokens}</Fact>
                  <Fact term="Output tokens">{found.output_tokens}</Fact>
                  <Fact term="Cost">
                    <Money amount={found.cost_usd} />
                  </Fact>
                  <Fact term="Provider's cost">{found.upstream_cost_usd === null ? '—' : <Money amount={found.upstream_cost_usd} />}</Fact>
                </dl>
              </Section>
              <Section title="Outcome and timing">
                <dl className="facts" data-testid="generation-timing">
                  <Fact term="Status">{status ? <span className={status.badge}>{status.label}</span> : '—'}</Fact>
                  <Fact term="Latency">{duration(found.latency_ms)}</Fact>
                  <Fact term="Time to first token">{duration(found.time_to_first_token_ms)}</Fact>
                  <Fact term="Platform overhead">{duration(found.overhead_ms)}</Fact>
                </dl>
              </Section>
              <Section title="Feedback">
                {found.feedback === null ? (
                  <p>
                    No feedback yet: rate it with <code>POST /v1/feedback</code>.
                  </p>
                ) : (
                  <dl className="facts" data-testid="generation-feedback">
                    <Fact term="Rating">{feedbackText({ ...found.feedback, tags: [] })}</Fact>
                    <Fact term="Tags">{found.feedback.tags.length > 0 ? found.feedback.tags.join(', ') : '—'}</Fact>
                  </dl>
                )}
              </Section>
            </>
          );
        }}
      </Loaded>
    </Page>
  );
}
