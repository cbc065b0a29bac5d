import type { ExchangeRecord } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import type { Knex } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import { exchangeProblem } from './conversations.js';
import { insertMessages, lockConversations, markApplied } from './store/exchanges.js';

/**
 * The data plane's conversation appends (docs/money-path.md#conversation-appends): the
 * ExchangeRecords of the work stream, a batch in one transaction. Each generation's messages are
 * appended once (applied_exchanges absorbs a record delivered or published again), in the order
 * of the batch, at consecutive positions of their conversation. A record that can never be
 * appended (its conversation deleted since the check, another workspace's conversation, a
 * malformed record) is logged and dropped: retrying it would hold back every record behind it.
 */

export interface AppendOutcome {
  /** Records whose messages were appended. */
  appended: number;
  /** Records of a generation appended before (or earlier in the batch). */
  repeated: number;
  dropped: number;
}

interface Exchange {
  record: ExchangeRecord;
  messages: Array<{ role: string; content: string }>;
}

export async function appendExchanges(trx: Knex.Transaction, records: readonly ExchangeRecord[], log: Logger): Promise<AppendOutcome> {
  const outcome: AppendOutcome = { appended: 0, repeated: 0, dropped: 0 };
  const drop = (record: ExchangeRecord, reason: string, level: 'info' | 'warn' = 'warn') => {
    outcome.dropped++;
    log[level](
      { generation_id: record.generationId, workspace_id: record.workspaceId, conversation_id: record.conversationId, reason },
      'conversation exchange dropped',
    );
  };

  const exchanges: Exchange[] = [];
  const seen = new Set<string>();
  for (const record of records) {
    if (!record.generationId || !record.workspaceId || !record.conversationId) {
      drop(record, 'generation_id, workspace_id and conversation_id are required');
      continue;
    }
    if (seen.has(record.generationId)) {
      outcome.repeated++;
      continue;
    }
    seen.add(record.generationId);
    // Postgres text cannot hold NUL, and one such message would fail the whole batch for ever.
    const messages = record.messages.map((message) => ({ role: message.role, content: message.content.replaceAll('\u0000', '\ufffd') }));
    const problem = exchangeProblem(messages);
    if (problem) drop(record, problem.rawMessage);
    else exchanges.push({ record, messages });
  }
  if (exchanges.length === 0) return outcome;

  const conversations = new Map(
    (await lockConversations(trx, [...new Set(exchanges.map((exchange) => exchange.record.conversationId))])).map((row) => [row.id, row]),
  );
  const owned = exchanges.filter(({ record }) => {
    const conversation = conversations.get(record.conversationId);
    if (!conversation) drop(record, 'the conversation no longer exists', 'info');
    else if (conversation.workspace_id !== record.workspaceId) drop(record, "the conversation is another workspace's");
    else return true;
    return false;
  });
  if (owned.length === 0) return outcome;

  const fresh = await markApplied(
    trx,
    owned.map(({ record }) => ({ generationId: record.generationId, conversationId: record.conversationId })),
  );
  const positions = new Map([...conversations.values()].map((row) => [row.id, BigInt(row.message_count)]));
  const messages: Parameters<typeof insertMessages>[1] = [];
  for (const { record, messages: exchange } of owned) {
    if (!fresh.has(record.generationId)) {
      outcome.repeated++;
      continue;
    }
    outcome.appended++;
    for (const message of exchange) {
      const position = positions.get(record.conversationId)! + 1n;
      positions.set(record.conversationId, position);
      messages.push({ id: newId('msg'), conversationId: record.conversationId, position, ...message });
    }
  }
  if (messages.length > 0) await insertMessages(trx, messages);
  return outcome;
}
