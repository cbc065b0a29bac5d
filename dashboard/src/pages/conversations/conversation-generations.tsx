import { Loaded } from '../../components/loaded';
import { Money } from '../../components/money';
import { formatDateTime } from '../../format';
import { can } from '../../permissions';
import { Link } from '../../router';
import { useSignedIn } from '../../session';
import { useLoad } from '../../use-load';
import { generationPath } from '../activity/generations-table';

/** How many of the workspace's latest generations are searched for the conversation's. */
const searched = 100;

/**
 * The model answers stored in this conversation (chat completions sent with
 * `X-Service-Conversation-Id`), each linking to its generation: a message does not carry its
 * generation's id, the generation carries its conversation's. Found among the workspace's latest
 * generations (the API lists generations by key, not by conversation).
 */
export function ConversationGenerations({ conversationId }: { conversationId: string }) {
  const { client, role } = useSignedIn();
  const readsGenerations = can(role, 'billing.read');
  const state = useLoad(
    async () => (readsGenerations ? await client.get('/v1/generations', { params: { query: { limit: searched } } }) : undefined),
    [client, readsGenerations, conversationId],
  );
  if (!readsGenerations) return null;
  return (
    <Loaded state={state} what="Loading the conversation's generations">
      {(page) => {
        const mine = (page?.data ?? []).filter((generation) => generation.conversation_id === conversationId);
        if (mine.length === 0) return null;
        return (
          <section className="conversation-generations" aria-labelledby="conversation-generations">
            <h2 id="conversation-generations">Generations</h2>
            <ul>
              {mine.map((generation) => (
                <li key={generation.generation_id}>
                  <Link to={generationPath(generation.generation_id)}>
                    <code>{generation.generation_id}</code>
                  </Link>{' '}
                  <span className="hint">
                    {formatDateTime(generation.created_at)}, <code>{generation.routed_model}</code>, {generation.input_tokens} + {generation.output_tokens}{' '}
                    tokens, <Money amount={generation.cost_usd} />
                  </span>
                </li>
              ))}
            </ul>
            {page?.has_more && <p className="hint">Among the workspace's latest {searched} requests; the Activity page lists every one.</p>}
          </section>
        );
      }}
    </Loaded>
  );
}
