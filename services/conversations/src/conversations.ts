import type { JsonObject, JsonValue, MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, type ConnectError } from '@connectrpc/connect';
import type {
  AppendExchangeResponseSchema,
  ConversationSchema,
  ListConversationsResponseSchema,
  ListMessagesResponseSchema,
  MessageSchema,
} from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { type AuditTrail, recordForeignObjectProbe } from '@switchboard/runtime/audit';
import type { WorkspaceCaller } from '@switchboard/runtime/caller';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import type { Db } from '@switchboard/runtime/sql';
import {
  appendMessage,
  type ConversationRow,
  conversationExists,
  deleteConversation,
  findConversation,
  insertConversation,
  listConversations,
  listMessages,
  type MessageRow,
  updateConversation,
} from './store/conversations.js';

/**
 * Stored conversations and their messages (docs/api/conversations.md#endpoints), inside the caller's workspace: another
 * workspace's conversation is a 404 like one that does not exist. Appending stores the message
 * and nothing else (no model call, no usage). The data plane appends a chat completion's
 * exchange (its user message and the answer) the same way, all of it or nothing.
 */

export const maxTitleLength = 512;
export const maxMetadataBytes = 4096;
export const maxContentLength = 200_000;
export const roles = ['user', 'assistant', 'system', 'tool'] as const;
/** The roles of an exchange the data plane stores (AppendExchange). */
export const exchangeRoles = ['user', 'assistant'] as const;
export const maxExchangeMessages = 16;

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

export function toConversation(row: ConversationRow): MessageInitShape<typeof ConversationSchema> {
  return {
    conversationId: row.id,
    title: row.title ?? undefined,
    metadata: row.metadata as JsonObject,
    createdAt: timestampFromDate(row.created_at),
    updatedAt: timestampFromDate(row.updated_at),
  };
}

export function toMessage(row: MessageRow): MessageInitShape<typeof MessageSchema> {
  return { messageId: row.id, conversationId: row.conversation_id, role: row.role, content: row.content, createdAt: timestampFromDate(row.created_at) };
}

/**
 * Why a message cannot be stored (a 400 naming the field: `role` and `content`, or those of the
 * message at `index` of an exchange, `messages[i].role`), or undefined.
 */
function messageProblem(
  input: { role: string; content: string },
  allowed: readonly string[] = roles,
  index?: number,
): ReturnType<typeof invalidArgument> | undefined {
  const field = (name: string) => (index === undefined ? name : `messages[${index}].${name}`);
  if (!allowed.includes(input.role)) return invalidArgument(field('role'), `${field('role')} must be one of ${allowed.join(', ')}.`);
  if (input.content === '') return invalidArgument(field('content'), `${field('content')} is required (1 to 200,000 characters).`);
  const length = codePoints(input.content);
  if (length > maxContentLength)
    return invalidArgument(field('content'), `${field('content')} may be at most ${maxContentLength} characters; this one has ${length}.`);
  return undefined;
}

/** Why an exchange cannot be stored (a 400 naming the field), or undefined. */
export function exchangeProblem(messages: ReadonlyArray<{ role: string; content: string }>): ReturnType<typeof invalidArgument> | undefined {
  if (messages.length > maxExchangeMessages)
    return invalidArgument('messages', `messages may hold at most ${maxExchangeMessages} messages; this exchange has ${messages.length}.`);
  for (const [index, message] of messages.entries()) {
    const problem = messageProblem(message, exchangeRoles, index);
    if (problem) return problem;
  }
  return undefined;
}

export class Conversations {
  /** `audit`: where a lookup of another workspace's conversation is recorded (access.denied). */
  constructor(private readonly deps: { db: Knex; audit?: AuditTrail }) {}

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

  /**
   * The 404 of a conversation the workspace cannot see. With `caller` (a client's call, which every
   * method below takes last), a miss that names another workspace's conversation is recorded
   * (docs/api/audit.md, `access.denied`).
   */
  private notFound(conversationId: string, caller: WorkspaceCaller | undefined): ConnectError {
    const { audit, db } = this.deps;
    if (audit && caller)
      void recordForeignObjectProbe(audit, caller, { type: 'conversation', id: conversationId }, () => conversationExists(db, conversationId));
    return conversationNotFound();
  }

  /** One conversation of the workspace. */
  async get(workspaceId: string, conversationId: string, caller?: WorkspaceCaller): Promise<MessageInitShape<typeof ConversationSchema>> {
    const row = conversationId ? await findConversation(this.deps.db, conversationId, workspaceId) : undefined;
    if (!row) throw this.notFound(conversationId, caller);
    return toConversation(row);
  }

  /** Changes what is sent: the title, and/or the metadata (replaced whole). */
  async update(
    workspaceId: string,
    conversationId: string,
    input: { title?: string; metadata?: JsonObject },
    caller?: WorkspaceCaller,
  ): Promise<MessageInitShape<typeof ConversationSchema>> {
    // Visibility first (404), then the input (400).
    if (!conversationId || !(await findConversation(this.deps.db, conversationId, workspaceId))) throw this.notFound(conversationId, caller);
    const changes = {
      title: input.title === undefined ? undefined : parseTitle(input.title),
      metadata: input.metadata === undefined ? undefined : parseMetadata(input.metadata),
    };
    const row = await updateConversation(this.deps.db, conversationId, workspaceId, changes);
    if (!row) throw this.notFound(conversationId, caller);
    return toConversation(row);
  }

  async delete(workspaceId: string, conversationId: string, caller?: WorkspaceCaller): Promise<void> {
    if (!conversationId || !(await deleteConversation(this.deps.db, conversationId, workspaceId))) throw this.notFound(conversationId, caller);
  }

  async append(
    workspaceId: string,
    conversationId: string,
    input: { role: string; content: string },
    caller?: WorkspaceCaller,
  ): Promise<MessageInitShape<typeof MessageSchema>> {
    if (!conversationId) throw conversationNotFound();
    await this.refuse(workspaceId, conversationId, messageProblem(input), caller);
    return toMessage(await this.store(this.deps.db, workspaceId, conversationId, input, caller));
  }

  /**
   * Appends an exchange of the data plane (AppendExchange): its messages in order, at consecutive
   * positions, in one transaction (a later one failing stores none). Without messages it only
   * checks that the conversation is the workspace's.
   */
  async appendExchange(
    workspaceId: string,
    conversationId: string,
    messages: ReadonlyArray<{ role: string; content: string }>,
  ): Promise<MessageInitShape<typeof AppendExchangeResponseSchema>> {
    // The data plane names the workspace: a missing id is its mistake (400), not an unknown conversation.
    if (!workspaceId) throw invalidArgument('workspace_id', 'workspace_id is required.');
    if (!conversationId) throw invalidArgument('conversation_id', 'conversation_id is required.');
    await this.refuse(workspaceId, conversationId, exchangeProblem(messages));
    if (messages.length === 0) {
      if (!(await findConversation(this.deps.db, conversationId, workspaceId))) throw conversationNotFound();
      return { messageIds: [] };
    }
    const rows = await this.deps.db.transaction(async (trx) => {
      const stored: MessageRow[] = [];
      for (const message of messages) stored.push(await this.store(trx, workspaceId, conversationId, message));
      return stored;
    });
    return { messageIds: rows.map((row) => row.id) };
  }

  /**
   * Throws `problem` if any, after visibility (docs/conventions.md#order-of-checks): a bad message
   * for a conversation the caller cannot see is a 404. The handlers also pass the 400 of the input
   * rules here (docs/conventions.md#input-rules).
   */
  async refuse(workspaceId: string, conversationId: string, problem: ReturnType<typeof invalidArgument> | undefined, caller?: WorkspaceCaller): Promise<void> {
    if (!problem) return;
    if (!(await findConversation(this.deps.db, conversationId, workspaceId))) throw this.notFound(conversationId, caller);
    throw problem;
  }

  /** Stores one checked message at the conversation's next position; 404 when the conversation is not the workspace's. */
  private async store(
    db: Db,
    workspaceId: string,
    conversationId: string,
    message: { role: string; content: string },
    caller?: WorkspaceCaller,
  ): Promise<MessageRow> {
    // The statement itself checks the conversation is the workspace's: one round trip per append.
    const row = await appendMessage(db, { id: newId('msg'), conversationId, workspaceId, role: message.role, content: message.content });
    if (!row) throw this.notFound(conversationId, caller);
    return row;
  }

  /** Messages by their position (the order they were stored in), asc by default; cursors never skip or repeat one. */
  async messages(
    workspaceId: string,
    conversationId: string,
    input: { limit?: number; after?: string; order: string },
    caller?: WorkspaceCaller,
  ): Promise<MessageInitShape<typeof ListMessagesResponseSchema>> {
    if (!conversationId || !(await findConversation(this.deps.db, conversationId, workspaceId))) throw this.notFound(conversationId, caller);
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
