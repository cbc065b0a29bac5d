import type { MessageInitShape } from '@bufbuild/protobuf';
import type {
  ExportUserConversationsRequest,
  ExportUserConversationsResponseSchema,
} from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { invalidArgument } from '@switchboard/runtime/errors';
import type { Db } from '@switchboard/runtime/sql';
import { toConversation, toMessage } from './conversations.js';
import { toFeedback } from './feedback.js';
import type { MessageRow } from './store/conversations.js';
import { conversationsToExport, feedbackToExport, messagesToExport } from './store/exports.js';

/**
 * The conversations, messages and feedback of a user's personal workspace, for identity's data
 * export (docs/api/identity.md#data-export). Messages are stored as plain text here (nothing to
 * decrypt). Every part is bounded by the request's limits; the flags say what was left out.
 */

function within(field: string, value: number | bigint, max: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > max) throw invalidArgument(field, `${field} must be from 1 to ${max}.`);
  return n;
}

export async function exportWorkspace(db: Db, req: ExportUserConversationsRequest): Promise<MessageInitShape<typeof ExportUserConversationsResponseSchema>> {
  if (req.workspaceId === '') throw invalidArgument('workspace_id', 'workspace_id is required.');
  const maxConversations = within('max_conversations', req.maxConversations, 10_000);
  const maxMessages = within('max_messages', req.maxMessages, 100_000);
  const maxChars = within('max_content_chars', req.maxContentChars, 50_000_000);
  const maxFeedback = within('max_feedback', req.maxFeedback, 100_000);

  const [conversationRows, feedbackRows] = await Promise.all([
    conversationsToExport(db, req.workspaceId, maxConversations),
    feedbackToExport(db, req.workspaceId, maxFeedback),
  ]);
  const conversations = conversationRows.slice(0, maxConversations);
  const messages = await messagesToExport(
    db,
    conversations.map((row) => row.id),
    maxMessages,
    maxChars,
  );
  const byConversation = new Map<string, MessageRow[]>();
  for (const message of messages.rows) {
    const list = byConversation.get(message.conversation_id);
    if (list) list.push(message);
    else byConversation.set(message.conversation_id, [message]);
  }
  return {
    conversations: conversations.map((row) => ({
      conversation: toConversation(row),
      messages: (byConversation.get(row.id) ?? []).map(toMessage),
    })),
    feedback: feedbackRows.slice(0, maxFeedback).map(toFeedback),
    conversationsTruncated: conversationRows.length > maxConversations,
    messagesTruncated: messages.rows.length < messages.total,
    feedbackTruncated: feedbackRows.length > maxFeedback,
  };
}
