import { Empty } from '../../components/empty';
import { LoadMore } from '../../components/load-more';
import { Loaded } from '../../components/loaded';
import { formatDateTime } from '../../format';
import { useSignedIn } from '../../session';
import { useLoad } from '../../use-load';
import { usePages } from '../../use-pages';

const roleLabels: Record<string, string> = { user: 'User', assistant: 'Assistant', system: 'System', tool: 'Tool' };

/** One conversation: its title and metadata, and its messages oldest first, a page at a time. */
export function ConversationView({ conversationId }: { conversationId: string }) {
  const { client } = useSignedIn();
  const path = { conversation_id: conversationId };
  const conversation = useLoad(() => client.get('/v1/conversations/{conversation_id}', { params: { path } }), [client, conversationId]);
  const messages = usePages(
    (after) => client.get('/v1/conversations/{conversation_id}/messages', { params: { path, query: { limit: 50, after, order: 'asc' } } }),
    [client, conversationId],
  );
  return (
    <Loaded state={conversation} what="Loading the conversation">
      {(found) => (
        <article className="conversation" aria-labelledby="conversation-title">
          <h2 id="conversation-title">{found.title || 'Untitled conversation'}</h2>
          <dl className="facts">
            <dt>Conversation id</dt>
            <dd>
              <code>{found.conversation_id}</code>
            </dd>
            <dt>Created</dt>
            <dd>{formatDateTime(found.created_at)}</dd>
            <dt>Last change</dt>
            <dd>{formatDateTime(found.updated_at)}</dd>
            {found.metadata && Object.keys(found.metadata).length > 0 && (
              <>
                <dt>Metadata</dt>
                <dd>
                  <pre className="metadata">{JSON.stringify(found.metadata, null, 2)}</pre>
                </dd>
              </>
            )}
          </dl>
          <h3>Messages</h3>
          <Loaded state={messages} what="Loading the messages">
            {(list) =>
              list.length === 0 ? (
                <Empty title="No messages yet">
                  <p>
                    Messages are appended with <code>POST /v1/conversations/{'{conversation_id}'}/messages</code>, or stored from chat completions sent with the
                    header <code>X-Service-Conversation-Id</code>.
                  </p>
                </Empty>
              ) : (
                <ol className="messages">
                  {list.map((message) => (
                    <li key={message.message_id} className={`message message-${message.role}`}>
                      <div className="message-head">
                        <strong>{roleLabels[message.role] ?? message.role}</strong> <span className="hint">{formatDateTime(message.created_at)}</span>
                      </div>
                      <div className="message-content">{message.content}</div>
                    </li>
                  ))}
                </ol>
              )
            }
          </Loaded>
          <LoadMore pages={messages} what="messages" />
        </article>
      )}
    </Loaded>
  );
}
