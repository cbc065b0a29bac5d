import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { create } from '@bufbuild/protobuf';
import { type ExchangeRecord, ExchangeRecordSchema } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { Conversations } from '@switchboard/conversations/conversations';
import { appendExchanges } from '@switchboard/conversations/exchange-appends';
import { createDb, type Knex, migrate } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import { createLogger } from '@switchboard/runtime/log';
import { requireEnv } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The batch append of the work stream's exchange records, each batch in a real transaction on a
 * migrated schema of its own, read back through the conversations domain.
 */

const schema = `conversations_exchanges_${randomBytes(3).toString('hex')}`;
const log = createLogger('exchange-appends-test', 'silent');
let db: Knex;
let conversations: Conversations;
const workspaceId = newId('org');

beforeAll(async () => {
  db = createDb(requireEnv('DATABASE_URL'), schema, 4);
  await migrate(db, schema, fileURLToPath(new URL('../dist/migrations/', import.meta.url)));
  conversations = new Conversations({ db });
});

afterAll(async () => {
  await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  await db.destroy();
});

function record(conversationId: string, messages: Array<[string, string]>, overrides: { generationId?: string; workspaceId?: string } = {}): ExchangeRecord {
  return create(ExchangeRecordSchema, {
    generationId: newId('gen'),
    workspaceId,
    conversationId,
    messages: messages.map(([role, content]) => ({ role, content })),
    ...overrides,
  });
}

const apply = (records: ExchangeRecord[]) => db.transaction((trx) => appendExchanges(trx, records, log));

async function newConversation(): Promise<string> {
  return (await conversations.create(workspaceId, {})).conversationId!;
}

describe('appendExchanges', () => {
  it('appends each record’s messages in the order of the batch, after the messages already there', async () => {
    const first = await newConversation();
    const second = await newConversation();
    await conversations.append(workspaceId, first, { role: 'system', content: 'be brief' });
    const before = (await conversations.get(workspaceId, first)).updatedAt;
    const outcome = await apply([
      record(first, [
        ['user', 'one?'],
        ['assistant', 'one.'],
      ]),
      record(second, [['user', 'elsewhere']]),
      record(first, [
        ['user', 'two?'],
        ['assistant', 'two.'],
      ]),
    ]);
    expect(outcome).toEqual({ appended: 3, repeated: 0, dropped: 0 });
    const rows = await db('messages').where({ conversation_id: first }).orderBy('position').select('position', 'role', 'content');
    expect(rows.map((row) => [Number(row.position), row.role, row.content])).toEqual([
      [1, 'system', 'be brief'],
      [2, 'user', 'one?'],
      [3, 'assistant', 'one.'],
      [4, 'user', 'two?'],
      [5, 'assistant', 'two.'],
    ]);
    expect((await conversations.messages(workspaceId, second, { order: 'asc' })).data?.map((message) => message.content)).toEqual(['elsewhere']);
    expect((await conversations.get(workspaceId, first)).updatedAt).not.toEqual(before);
    // An append after the batch takes the next position.
    await conversations.append(workspaceId, first, { role: 'user', content: 'three?' });
    expect((await conversations.messages(workspaceId, first, { order: 'desc', limit: 1 })).data?.[0].content).toBe('three?');
  });

  it('appends a generation once, repeated in a batch or delivered again', async () => {
    const conversationId = await newConversation();
    const exchange = record(conversationId, [
      ['user', 'once?'],
      ['assistant', 'once.'],
    ]);
    expect(await apply([exchange, exchange])).toEqual({ appended: 1, repeated: 1, dropped: 0 });
    expect(await apply([exchange, record(conversationId, [['user', 'next']])])).toEqual({ appended: 1, repeated: 1, dropped: 0 });
    expect((await conversations.messages(workspaceId, conversationId, { order: 'asc' })).data?.map((message) => message.content)).toEqual([
      'once?',
      'once.',
      'next',
    ]);
  });

  it('drops what can never be appended, and appends the rest of the batch', async () => {
    const conversationId = await newConversation();
    const foreign = (await conversations.create(newId('org'), {})).conversationId!;
    const deleted = await newConversation();
    await conversations.delete(workspaceId, deleted);
    const outcome = await apply([
      record(foreign, [['user', 'not yours']]),
      record(deleted, [['user', 'too late']]),
      record(newId('conv'), [['user', 'never was']]),
      record(conversationId, [['tool', 'not an exchange role']]),
      record(conversationId, [['user', '']]),
      record(conversationId, [['user', 'x'.repeat(200_001)]]),
      record(conversationId, [['user', 'no workspace']], { workspaceId: '' }),
      record(conversationId, [['user', 'no generation']], { generationId: '' }),
      record(conversationId, [['user', 'kept']]),
    ]);
    expect(outcome).toEqual({ appended: 1, repeated: 0, dropped: 8 });
    expect((await conversations.messages(workspaceId, conversationId, { order: 'asc' })).data?.map((message) => message.content)).toEqual(['kept']);
    expect(await db('messages').where({ conversation_id: foreign }).pluck('id')).toEqual([]);
  });

  it('stores a NUL as U+FFFD rather than failing the batch', async () => {
    const conversationId = await newConversation();
    expect(await apply([record(conversationId, [['assistant', 'a\u0000b']])])).toEqual({ appended: 1, repeated: 0, dropped: 0 });
    expect((await conversations.messages(workspaceId, conversationId, { order: 'asc' })).data?.[0].content).toBe('a\ufffdb');
  });

  it('keeps positions unique and gapless beside concurrent batches and appends', async () => {
    const conversationId = await newConversation();
    const batch = (tag: string) =>
      Array.from({ length: 5 }, (_, i) =>
        record(conversationId, [
          ['user', `${tag}${i}?`],
          ['assistant', `${tag}${i}.`],
        ]),
      );
    await Promise.all([
      apply(batch('a')),
      apply(batch('b')),
      ...Array.from({ length: 5 }, (_, i) => conversations.append(workspaceId, conversationId, { role: 'user', content: `c${i}` })),
    ]);
    const positions = (await db('messages').where({ conversation_id: conversationId }).orderBy('position').pluck('position')).map(Number);
    expect(positions).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    const contents = (await db('messages').where({ conversation_id: conversationId }).orderBy('position').pluck('content')) as string[];
    // Each exchange's question and answer sit side by side.
    for (const tag of ['a', 'b']) for (let i = 0; i < 5; i++) expect(contents.indexOf(`${tag}${i}.`)).toBe(contents.indexOf(`${tag}${i}?`) + 1);
  });

  it('forgets the applied generations of a deleted conversation with it', async () => {
    const conversationId = await newConversation();
    await apply([record(conversationId, [['user', 'hi']])]);
    const applied = () => db('applied_exchanges').where({ conversation_id: conversationId }).pluck('generation_id');
    expect(await applied()).toHaveLength(1);
    await conversations.delete(workspaceId, conversationId);
    expect(await applied()).toEqual([]);
  });
});
