import { type Db, microsOf, type PageQuery, pageClause } from '@switchboard/runtime/sql';

// Conversations and their messages.

export interface ConversationRow {
  id: string;
  workspace_id: string;
  title: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  cursor_micros: string;
}

const conversationColumns = `id, workspace_id, title, metadata, created_at, updated_at, ${microsOf('created_at')} AS cursor_micros`;

export async function insertConversation(db: Db, row: { id: string; workspaceId: string; title: string | null; metadata: string }): Promise<ConversationRow> {
  const { rows } = await db.raw<{ rows: ConversationRow[] }>(
    `INSERT INTO conversations (id, workspace_id, title, metadata) VALUES (?, ?, ?, ?::json) RETURNING ${conversationColumns}`,
    [row.id, row.workspaceId, row.title, row.metadata],
  );
  return rows[0];
}

/** Whether a conversation `id` exists in any workspace (the miss path of a lookup: a probe of another workspace's). */
export async function conversationExists(db: Db, id: string): Promise<boolean> {
  return (await db('conversations').where({ id }).first('id')) !== undefined;
}

export async function findConversation(db: Db, id: string, workspaceId: string): Promise<ConversationRow | undefined> {
  const { rows } = await db.raw<{ rows: ConversationRow[] }>(`SELECT ${conversationColumns} FROM conversations WHERE id = ? AND workspace_id = ?`, [
    id,
    workspaceId,
  ]);
  return rows[0];
}

export async function listConversations(db: Db, workspaceId: string, page: PageQuery): Promise<ConversationRow[]> {
  const { cursor, bindings } = pageClause(page, 'created_at', 'id', [workspaceId]);
  const { rows } = await db.raw<{ rows: ConversationRow[] }>(
    `SELECT ${conversationColumns} FROM conversations WHERE workspace_id = ? ${cursor} ORDER BY created_at DESC, id DESC LIMIT ?`,
    bindings,
  );
  return rows;
}

/** Changes title and/or metadata (undefined: left as is); undefined when there is no such conversation. */
export async function updateConversation(
  db: Db,
  id: string,
  workspaceId: string,
  changes: { title?: string | null; metadata?: string },
): Promise<ConversationRow | undefined> {
  const { rows } = await db.raw<{ rows: ConversationRow[] }>(
    `UPDATE conversations SET
       title = CASE WHEN ? THEN ? ELSE title END,
       metadata = CASE WHEN ? THEN ?::json ELSE metadata END,
       updated_at = now()
     WHERE id = ? AND workspace_id = ? RETURNING ${conversationColumns}`,
    [changes.title !== undefined, changes.title ?? null, changes.metadata !== undefined, changes.metadata ?? '{}', id, workspaceId],
  );
  return rows[0];
}

/** Deletes the conversation (its messages go with it); false when there was none. */
export async function deleteConversation(db: Db, id: string, workspaceId: string): Promise<boolean> {
  return (await db('conversations').where({ id, workspace_id: workspaceId }).delete()) === 1;
}

export interface MessageRow {
  id: string;
  conversation_id: string;
  position: string;
  role: string;
  content: string;
  created_at: Date;
}

/**
 * Appends a message at the next position of the conversation, in one statement: the update locks
 * the conversation row until commit, so concurrent appends take positions 1, 2, 3… in commit
 * order (a reader paging by position never skips one that commits later). Undefined when the
 * conversation is not the workspace's.
 */
export async function appendMessage(
  db: Db,
  message: { id: string; conversationId: string; workspaceId: string; role: string; content: string },
): Promise<MessageRow | undefined> {
  const { rows } = await db.raw<{ rows: MessageRow[] }>(
    `WITH next AS (
       UPDATE conversations SET message_count = message_count + 1, updated_at = now()
        WHERE id = ? AND workspace_id = ? RETURNING id, message_count
     )
     INSERT INTO messages (id, conversation_id, position, role, content)
     SELECT ?, next.id, next.message_count, ?, ? FROM next
     RETURNING id, conversation_id, position::text AS position, role, content, created_at`,
    [message.conversationId, message.workspaceId, message.id, message.role, message.content],
  );
  return rows[0];
}

/**
 * Messages by position after `afterPosition`, ascending or descending; `limit + 1` rows. The sort
 * names the column (`messages.position`): a bare `position` would be the text output column, which
 * sorts 1, 10, 100, 11… and breaks both the order and the cursor.
 */
export async function listMessages(
  db: Db,
  conversationId: string,
  order: 'asc' | 'desc',
  afterPosition: string | undefined,
  limit: number,
): Promise<MessageRow[]> {
  const comparison = order === 'asc' ? '>' : '<';
  const { rows } = await db.raw<{ rows: MessageRow[] }>(
    `SELECT id, conversation_id, position::text AS position, role, content, created_at FROM messages
      WHERE conversation_id = ? ${afterPosition === undefined ? '' : `AND messages.position ${comparison} ?::bigint`}
      ORDER BY messages.position ${order === 'asc' ? 'ASC' : 'DESC'} LIMIT ?`,
    afterPosition === undefined ? [conversationId, limit + 1] : [conversationId, afterPosition, limit + 1],
  );
  return rows;
}
