import type { Knex } from '@switchboard/runtime/db';

// The exchanges of the work stream, appended in batches: the conversations they go to, the
// generations already appended, and the messages.

export interface LockedConversation {
  id: string;
  workspace_id: string;
  /** The position of its last message. */
  message_count: string;
}

/**
 * The conversations among `ids` that exist, locked until commit like an append locks its one
 * (positions stay in commit order), in id order so that concurrent batches never deadlock.
 */
export async function lockConversations(trx: Knex.Transaction, ids: string[]): Promise<LockedConversation[]> {
  const { rows } = await trx.raw<{ rows: LockedConversation[] }>(
    'SELECT id, workspace_id, message_count::text AS message_count FROM conversations WHERE id = ANY(?::text[]) ORDER BY id FOR UPDATE',
    [ids],
  );
  return rows;
}

/** Records the generations as appended; returns those that were not already. */
export async function markApplied(trx: Knex.Transaction, exchanges: Array<{ generationId: string; conversationId: string }>): Promise<Set<string>> {
  const { rows } = await trx.raw<{ rows: Array<{ generation_id: string }> }>(
    `INSERT INTO applied_exchanges (generation_id, conversation_id)
     SELECT * FROM unnest(?::text[], ?::text[]) ON CONFLICT (generation_id) DO NOTHING RETURNING generation_id`,
    [exchanges.map((exchange) => exchange.generationId), exchanges.map((exchange) => exchange.conversationId)],
  );
  return new Set(rows.map((row) => row.generation_id));
}

/**
 * Inserts messages at the positions given, and moves each of their conversations to its last
 * position (updated now): the conversations must be locked by this transaction.
 */
export async function insertMessages(
  trx: Knex.Transaction,
  messages: Array<{ id: string; conversationId: string; position: bigint; role: string; content: string }>,
): Promise<void> {
  const last = new Map<string, bigint>();
  for (const message of messages) last.set(message.conversationId, message.position);
  await trx.raw(
    `INSERT INTO messages (id, conversation_id, position, role, content)
     SELECT * FROM unnest(?::text[], ?::text[], ?::bigint[], ?::text[], ?::text[])`,
    [
      messages.map((message) => message.id),
      messages.map((message) => message.conversationId),
      messages.map((message) => message.position.toString()),
      messages.map((message) => message.role),
      messages.map((message) => message.content),
    ],
  );
  await trx.raw(
    `UPDATE conversations AS c SET message_count = v.message_count, updated_at = now()
       FROM unnest(?::text[], ?::bigint[]) AS v(id, message_count) WHERE c.id = v.id`,
    [[...last.keys()], [...last.values()].map(String)],
  );
}
