import type { JsonObject, JsonValue, MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import type {
  ConversationSchema,
  ListConversationsResponseSchema,
  ListMessagesResponseSchema,
  MessageSchema,
} from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import {
  appendMessage,
  type ConversationRow,
  deleteConversation,
  findConversation,
  insertConversation,
  listConversations,
  listMessages,
  type MessageRow,
  updateConversation,
} from './store/conversations.js';

/**
 * Stored conversations and their messages (SPEC §6), inside the caller's workspace: another
 * workspace's conversation is a 404 like one that does not exist. Appending stores the message
 * and nothing else (no model call, no usage).
 */

export const maxTitleLength = 512;
export const maxMetadataBytes = 4096;
export const maxContentLength = 200_000;
export const roles = ['user', 'assistant', 'system', 'tool'] as const;

const conversationNotFound = () => apiError(Code.NotFound, 'conversation_not_found', 'No such conversation in this workspace.');

const codePoints = (text: string) => {
  let count = 0;
  for (const _ of text) count++;
  return count;
};

function parseTitle(title: string): string {
  const length = codePoints(title);
  if (length > maxTitleLength) throw invalidArgument('title', `title may be at most ${maxTitleLength} characters; this one has ${length}.`);
  return title;
}

/** Whether a key or string anywhere in `value` holds a NUL character (which Postgres cannot store in jsonb). */
function holdsNul(value: JsonValue): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (Array.isArray(value)) return value.some(holdsNul);
  if (value !== null && typeof value === 'object') return Object.entries(value).some(([key, item]) => key.includes('\u0000') || holdsNul(item));
  return false;
}

/** Any JSON object of at most 4096 bytes as compact UTF-8 JSON (JSON.stringify without spaces), without NUL characters. */
function parseMetadata(metadata: JsonObject): string {
  if (holdsNul(metadata)) throw invalidArgument('metadata', 'metadata must not contain a NUL character (\\u0000) in a key or a string.');
  const compact = JSON.stringify(metadata);
  const bytes = Buffer.byteLength(compact, 'utf8');
  if (bytes > maxMetadataBytes) throw invalidArgument('metadata', `metadata may be at most ${maxMetadataBytes} bytes as compact JSON; this one is ${bytes}.`);
  return compact;
}

function toConversation(row: ConversationRow): MessageInitShape<typeof ConversationSchema> {
  return {
    conversationId: row.id,
    title: row.title ?? undefined,
    metadata: row.metadata as JsonObject,
    createdAt: timestampFromDate(row.created_at),
    updatedAt: timestampFromDate(row.updated_at),
  };
}

function toMessage(row: MessageRow): MessageInitShape<typeof MessageSchema> {
  return { messageId: row.id, conversationId: row.conversation_id, role: row.role, content: row.content, createdAt: timestampFromDate(row.created_at) };
}

/** Why a message cannot be stored (a 400 naming the field), or undefined. */
function messageProblem(input: { role: string; content: string }): ReturnType<typeof invalidArgument> | undefined {
  if (!(roles as readonly string[]).includes(input.role)) return invalidArgument('role', `role must be one of ${roles.join(', ')}.`);
  if (input.content === '') return invalidArgument('content', 'content is required (1 to 200,000 characters).');
  const length = codePoints(input.content);
  if (length > maxContentLength) return invalidArgument('content', `content may be at most ${maxContentLength} characters; this one has ${length}.`);
  return undefined;
}

export class Conversations {
  constructor(private readonly deps: { db: Knex }) {}

  async create(workspaceId: string, input: { title?: string; metadata?: JsonObject }): Promise<MessageInitShape<typeof ConversationSchema>> {
    const title = input.title === undefined ? null : parseTitle(input.title);
    const metadata = parseMetadata(input.metadata ?? {});
    return toConversation(await insertConversation(this.deps.db, { id: newId('conv'), workspaceId, title, metadata }));
  }

  async list(workspaceId: string, input: { limit?: number; after?: string }): Promise<MessageInitShape<typeof ListConversationsResponseSchema>> {
    const limit = parseLimit(input.limit);
    const rows = await listConversations(this.deps.db, workspaceId, { limit, after: decodeCursor(input.after) });
    const page = pageOf(rows, limit, (row) => ({ micros: row.cursor_micros, id: row.id }));
    return { data: page.rows.map(toConversation), hasMore: page.hasMore, nextCursor: page.nextCursor };
  }

  async get(workspaceId: string, conversationId: string): Promise<MessageInitShape<typeof ConversationSchema>> {
    const row = conversationId ? await findConversation(this.deps.db, conversationId, workspaceId) : undefined;
    if (!row) throw conversationNotFound();
    return toConversation(row);
  }

  /** Changes what is sent: the title, and/or the metadata (replaced whole). */
  async update(
    workspaceId: string,
    conversationId: string,
    input: { title?: string; metadata?: JsonObject },
  ): Promise<MessageInitShape<typeof ConversationSchema>> {
    // Visibility first (404), then the input (400).
    if (!conversationId || !(await findConversation(this.deps.db, conversationId, workspaceId))) throw conversationNotFound();
    const changes = {
      title: input.title === undefined ? undefined : parseTitle(input.title),
      metadata: input.metadata === undefined ? undefined : parseMetadata(input.metadata),
    };
    const row = await updateConversation(this.deps.db, conversationId, workspaceId, changes);
    if (!row) throw conversationNotFound();
    return toConversation(row);
  }

  async delete(workspaceId: string, conversationId: string): Promise<void> {
    if (!conversationId || !(await deleteConversation(this.deps.db, conversationId, workspaceId))) throw conversationNotFound();
  }

  async append(workspaceId: string, conversationId: string, input: { role: string; content: string }): Promise<MessageInitShape<typeof MessageSchema>> {
    if (!conversationId) throw conversationNotFound();
    const problem = messageProblem(input);
    // Visibility before input (SPEC §10): a bad message for a conversation the caller cannot see is a 404.
    if (problem) {
      if (!(await findConversation(this.deps.db, conversationId, workspaceId))) throw conversationNotFound();
      throw problem;
    }
    // The statement itself checks the conversation is the workspace's: one round trip per append.
    const row = await appendMessage(this.deps.db, { id: newId('msg'), conversationId, workspaceId, role: input.role, content: input.content });
    if (!row) throw conversationNotFound();
    return toMessage(row);
  }

  /** Messages by their position (the order they were stored in), asc by default; cursors never skip or repeat one. */
  async messages(
    workspaceId: string,
    conversationId: string,
    input: { limit?: number; after?: string; order: string },
  ): Promise<MessageInitShape<typeof ListMessagesResponseSchema>> {
    if (!conversationId || !(await findConversation(this.deps.db, conversationId, workspaceId))) throw conversationNotFound();
    const limit = parseLimit(input.limit);
    const order = input.order === '' ? 'asc' : input.order;
    if (order !== 'asc' && order !== 'desc') throw invalidArgument('order', 'order must be asc or desc.');
    // The cursor of a message list carries its position where time lists carry microseconds.
    const after = decodeCursor(input.after);
    const rows = await listMessages(this.deps.db, conversationId, order, after?.micros, limit);
    const page = pageOf(rows, limit, (row) => ({ micros: row.position, id: row.id }));
    return { data: page.rows.map(toMessage), hasMore: page.hasMore, nextCursor: page.nextCursor };
  }
}
