import type { Schemas } from '@switchboard/sdk';
import { Money } from '../../components/money';
import { formatDateTime } from '../../format';
import { Link } from '../../router';

/** The address of a generation's detail page. */
export function generationPath(generationId: string): string {
  return `/generations/${encodeURIComponent(generationId)}`;
}

type Generation = Schemas['switchboard.billing.v1.GenerationRecord'];

export const statuses: Record<string, { label: string; badge: string }> = {
  completed: { label: 'completed', badge: 'badge ok' },
  client_closed: { label: 'client closed', badge: 'badge warn' },
  upstream_error: { label: 'upstream error', badge: 'badge bad' },
};

/** The rating given to a generation and its tags, in words; '—' for none. */
export function feedbackText(feedback: Generation['feedback']): string {
  if (!feedback) return '—';
  const rating = feedback.rating > 0 ? 'Good' : feedback.rating < 0 ? 'Bad' : 'Neutral';
  return feedback.tags.length > 0 ? `${rating}: ${feedback.tags.join(', ')}` : rating;
}

/** Generations, newest first: what was asked for and what served it, tokens, the exact cost, timing and feedback. */
export function GenerationsTable({ generations, keyNames }: { generations: Generation[]; keyNames: Map<string, string> }) {
  return (
    <table className="data-table generations">
      <thead>
        <tr>
          <th scope="col">When</th>
          <th scope="col">Model</th>
          <th scope="col">Tokens in / out</th>
          <th scope="col">Cost</th>
          <th scope="col">Latency</th>
          <th scope="col">Status</th>
          <th scope="col">Feedback</th>
        </tr>
      </thead>
      <tbody>
        {generations.map((generation) => {
          // Records made before the data plane reported these facts have none.
          const status = generation.status === null ? undefined : (statuses[generation.status] ?? { label: generation.status, badge: 'badge' });
          return (
            <tr key={generation.generation_id}>
              <th scope="row">
                {formatDateTime(generation.created_at)}
                <div className="muted small">
                  <Link to={generationPath(generation.generation_id)}>
                    <code>{generation.generation_id}</code>
                  </Link>
                </div>
                <div className="muted small">key {keyNames.get(generation.key_id) ?? generation.key_id}</div>
              </th>
              <td>
                <code>{generation.model}</code>
                {generation.routed_model !== generation.model && (
                  <div className="muted small">
                    served by <code>{generation.routed_model}</code>
                  </div>
                )}
                <div className="muted small">
                  {[generation.tier, generation.region, generation.streamed ? 'streamed' : undefined].filter(Boolean).join(', ')}
                </div>
              </td>
              <td className="nowrap">
                {generation.input_tokens} / {generation.output_tokens}
              </td>
              <td>
                <Money amount={generation.cost_usd} />
              </td>
              <td className="nowrap">
                {generation.latency_ms === null ? '—' : `${generation.latency_ms} ms`}
                {generation.streamed && generation.time_to_first_token_ms !== null && (
                  <div className="muted small">first token {generation.time_to_first_token_ms} ms</div>
                )}
              </td>
              <td>{status ? <span className={status.badge}>{status.label}</span> : '—'}</td>
              <td>{feedbackText(generation.feedback)}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
