import { Empty } from '../components/empty';
import { LoadMore } from '../components/load-more';
import { Loaded } from '../components/loaded';
import { Page } from '../components/page';
import { formatDateTime } from '../format';
import { Link } from '../router';
import { useSignedIn } from '../session';
import { usePages } from '../use-pages';
import { ConversationGenerations } from './conversations/conversation-generations';
import { ConversationView } from './conversations/conversation-view';

/**
 * The workspace's conversations, newest first, a page at a time, beside the messages of the one
 * picked (`/conversations/conv_…`: a link to share, and Back works). The list stays loaded while
 * conversations are picked: both paths show this same page.
 */
export function ConversationsPage({ params }: { params: Record<string, string> }) {
  const { client, workspace } = useSignedIn();
  const selected = params.conversationId;
  const conversations = usePages((after) => client.get('/v1/conversations', { params: { query: { limit: 20, after } } }), [client, workspace.org_id]);
  return (
    <Page title="Conversations">
      <div className="split">
        <nav className="split-list" aria-label="Conversations">
          <Loaded state={conversations} what="Loading the conversations">
            {(list) =>
              list.length === 0 ? (
                <Empty title="No conversations yet">
                  <p>
                    Create one with <code>POST /v1/conversations</code>; chat completions sent with <code>X-Service-Conversation-Id</code> are stored in it.
                  </p>
                </Empty>
              ) : (
                <ul className="conversation-list">
                  {list.map((conversation) => (
                    <li key={conversation.conversation_id}>
                      <Link
                        to={`/conversations/${encodeURIComponent(conversation.conversation_id)}`}
                        aria-current={conversation.conversation_id === selected ? 'page' : undefined}
                      >
                        <span className="conversation-title">{conversation.title || 'Untitled conversation'}</span>
                        <span className="hint">{formatDateTime(conversation.updated_at)}</span>
                      </Link>
                    </li>
                  ))}
                </ul>
              )
            }
          </Loaded>
          <LoadMore pages={conversations} what="conversations" />
        </nav>
        <div className="split-detail">
          {selected ? (
            <>
              <ConversationView key={selected} conversationId={selected} />
              <ConversationGenerations key={`${selected}-generations`} conversationId={selected} />
            </>
          ) : (
            <Empty title="Pick a conversation">
              <p>Its messages show here, oldest first.</p>
            </Empty>
          )}
        </div>
      </div>
    </Page>
  );
}
