import type { Db } from '@switchboard/runtime/sql';
import type { ConversationRow, MessageRow } from './conversations.js';
import type { FeedbackRow } from './feedback.js';

// What a data export reads of a workspace (src/export.ts): bounded; no message's content is read past the limits.

/** The workspace's conversations, newest first; `limit + 1` rows. */
export async function conversationsToExport(db: Db, workspaceId: string, limit: number): Promise<ConversationRow[]> {
  const { rows } = await db.raw<{ rows: ConversationRow[] }>(
    `SELECT id, workspace_id, title, metadata, created_at, updated_at, '' AS cursor_micros FROM conversations
      WHERE workspace_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`,
    [workspaceId, limit + 1],
  );
  return rows;
}

/**
 * The messages of `conversationIds`, conversation by conversation in the order given, each in
 * position order, as long as there are at most `maxMessages` of them with at most `maxChars`
 * characters of content in all; and how many messages those conversations hold.
 */
export async function messagesToExport(
  db: Db,
  conversationIds: string[],
  maxMessages: number,
  maxChars: number,
): Promise<{ rows: MessageRow[]; total: number }> {
  if (conversationIds.length === 0) return { rows: [], total: 0 };
  const [{ rows }, counted] = await Promise.all([
    db.raw<{ rows: MessageRow[] }>(
      // The running counts are computed over ids and lengths only (the sort never carries the
      // content); the content is read for the messages kept.
      `SELECT m.id, m.conversation_id, m.position::text AS position, m.role, m.content, m.created_at FROM (
         SELECT m.id, row_number() OVER w AS n, sum(char_length(m.content)) OVER w AS chars
           FROM messages m JOIN unnest(?::text[]) WITH ORDINALITY AS c(id, ord) ON c.id = m.conversation_id
         WINDOW w AS (ORDER BY c.ord, m.position ROWS UNBOUNDED PRECEDING)
       ) x JOIN messages m ON m.id = x.id WHERE x.n <= ? AND x.chars <= ? ORDER BY x.n`,
      [conversationIds, maxMessages, maxChars],
    ),
    db.raw<{ rows: Array<{ total: number }> }>('SELECT count(*)::int AS total FROM messages WHERE conversation_id = ANY(?::text[])', [conversationIds]),
  ]);
  return { rows, total: counted.rows[0].total };
}

/** The feedback given in the workspace, newest first; `limit + 1` rows. */
export async function feedbackToExport(db: Db, workspaceId: string, limit: number): Promise<FeedbackRow[]> {
  const { rows } = await db.raw<{ rows: FeedbackRow[] }>(
    `SELECT id, generation_id, rating, comment, tags, tier, model, created_at, updated_at FROM feedback
      WHERE workspace_id = ? ORDER BY updated_at DESC, id DESC LIMIT ?`,
    [workspaceId, limit + 1],
  );
  return rows;
}
