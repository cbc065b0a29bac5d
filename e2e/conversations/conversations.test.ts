import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { EventBus } from '@switchboard/testkit/events';
import { Mailbox } from '@switchboard/testkit/mailbox';
import { type ApiResponse, bootMesh, expectErrorBody, restClient, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Conversations, messages and feedback through REST (docs/api/conversations.md#endpoints, docs/conventions.md#limits): every endpoint, the records,
 * every refusal with its error body, exact limits, ordering under concurrent appends, tenant
 * isolation, and feedback on generations recorded by the data plane (RecordUsage).
 */

let mesh: Mesh;
let call: ReturnType<typeof restClient>;
let dataPlane: ReturnType<typeof meshClient<typeof UsageService>>;
let mailbox: Mailbox;

beforeAll(async () => {
  // Debug level: the RPC lines of billing show which calls asked it for a generation.
  mesh = await bootMesh({ LOG_LEVEL: 'debug' });
  call = restClient(mesh.gatewayUrl);
  dataPlane = meshClient(UsageService, mesh.urls.billing, 'billing', { caller: 'data-plane' });
  mailbox = new Mailbox(mesh.env.MAILBOX_DIR);
});

afterAll(async () => {
  await mesh?.stop();
});

type User = SignedUp;

const inWorkspace = (workspaceId?: string) => (workspaceId ? { 'x-workspace-id': workspaceId } : undefined);

// biome-ignore lint/suspicious/noExplicitAny: the JSON record of a route.
type Json = any;

async function createConversation(token: string, body: unknown = {}, workspaceId?: string): Promise<Json> {
  const response = await call('POST', '/v1/conversations', { token, body, headers: inWorkspace(workspaceId) });
  expect(response.status, response.text).toBe(201);
  return response.json;
}

async function append(token: string, conversationId: string, body: unknown, workspaceId?: string): Promise<Json> {
  const response = await call('POST', `/v1/conversations/${conversationId}/messages`, { token, body, headers: inWorkspace(workspaceId) });
  expect(response.status, response.text).toBe(201);
  return response.json;
}

/**
 * Every item of a list, page by page through `next_cursor` (the path carries its own query),
 * checking the list shape of docs/conventions.md#pagination on every page.
 */
async function listAll(token: string, path: string, workspaceId?: string): Promise<Json[]> {
  const items: Json[] = [];
  let after: string | null = null;
  for (let page = 0; page < 1000; page++) {
    const separator = path.includes('?') ? '&' : '?';
    const response: ApiResponse = await call('GET', after ? `${path}${separator}after=${after}` : path, { token, headers: inWorkspace(workspaceId) });
    expect(response.status, response.text).toBe(200);
    expect(Object.keys(response.json).sort()).toEqual(['data', 'has_more', 'next_cursor']);
    items.push(...response.json.data);
    if (!response.json.has_more) {
      expect(response.json.next_cursor).toBeNull();
      return items;
    }
    expect(response.json.next_cursor).toEqual(expect.any(String));
    after = response.json.next_cursor;
  }
  throw new Error(`${path} did not end`);
}

const idsOf = (items: Json[], field = 'conversation_id'): string[] => items.map((item) => item[field]);
const conversationFields = ['conversation_id', 'created_at', 'metadata', 'title', 'updated_at'];
const messageFields = ['content', 'conversation_id', 'created_at', 'message_id', 'role'];
const feedbackFields = ['comment', 'created_at', 'feedback_id', 'generation_id', 'model', 'rating', 'tags', 'updated_at'];

/** Bytes of the compact UTF-8 JSON of a value, escapes written as JSON.stringify writes them (docs/conventions.md#limits). */
const compactBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');

/**
 * Metadata of exactly `bytes` compact bytes, with 2-, 3- and 4-byte characters and escaped ones
 * (a quote and a backslash take 2 bytes, a control character 6, a newline 2), padded with ASCII.
 */
function metadataOf(bytes: number): { user: string; note: string; nested: unknown; pad: string } {
  const metadata = {
    user: 'usr_é€😀',
    note: 'a "quote", a back\\slash, a new\nline, a tab\t, a control \u0001, a line separator \u2028, 日本語',
    nested: { list: [1, 2.5, -3e-7, true, false, null, 'ß'], empty: {}, none: [] },
    pad: '',
  };
  metadata.pad = 'x'.repeat(bytes - compactBytes(metadata));
  expect(compactBytes(metadata)).toBe(bytes);
  return metadata;
}

describe('conversations', () => {
  it('answers metadata as it was sent, keys in their order', async () => {
    const { token } = await signUp(call);
    const metadata = { zeta: 1, alpha: { y: [3, 'x', null, true], b: 2.5 }, middle: 'm' };
    const created = await call('POST', '/v1/conversations', { token, body: { metadata } });
    expect(JSON.stringify(created.json.metadata)).toBe(JSON.stringify(metadata));
    const read = await call('GET', `/v1/conversations/${created.json.conversation_id}`, { token });
    expect(JSON.stringify(read.json.metadata)).toBe(JSON.stringify(metadata));
  });

  it('creates, reads, updates and deletes a conversation with its messages', async () => {
    const { token } = await signUp(call);
    const created = await call('POST', '/v1/conversations', { token, body: { title: 'Support', metadata: { user: 'u1' } } });
    expect(created.status, created.text).toBe(201);
    expect(created.json).toMatchObject({ conversation_id: expect.stringMatching(/^conv_/), title: 'Support', metadata: { user: 'u1' } });
    const id = created.json.conversation_id;
    const message = await call('POST', `/v1/conversations/${id}/messages`, { token, body: { role: 'user', content: 'Hello 👋' } });
    expect(message.status, message.text).toBe(201);
    expect(message.json).toMatchObject({ message_id: expect.stringMatching(/^msg_/), conversation_id: id, role: 'user', content: 'Hello 👋' });
    const listed = await call('GET', `/v1/conversations/${id}/messages`, { token });
    expect(listed.json.data).toHaveLength(1);
    expect((await call('PATCH', `/v1/conversations/${id}`, { token, body: { title: 'Renamed' } })).json).toMatchObject({
      title: 'Renamed',
      metadata: { user: 'u1' },
    });
    expect((await call('DELETE', `/v1/conversations/${id}`, { token })).status).toBe(204);
    expectErrorBody(await call('GET', `/v1/conversations/${id}`, { token }), 404, 'conversation_not_found');
  });

  it('creates with title and metadata optional: 201, title null and metadata {} when not given', async () => {
    const { token } = await signUp(call);
    for (const options of [{ body: {} }, {}, { body: { title: null, metadata: null } }]) {
      const response = await call('POST', '/v1/conversations', { token, ...options });
      expect(response.status, response.text).toBe(201);
      expect(Object.keys(response.json).sort()).toEqual(conversationFields);
      expect(response.json).toEqual({
        conversation_id: expect.stringMatching(/^conv_[A-Za-z0-9]+$/),
        title: null,
        metadata: {},
        created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/),
        updated_at: response.json.created_at,
      });
      const got = await call('GET', `/v1/conversations/${response.json.conversation_id}`, { token });
      expect(got.status).toBe(200);
      expect(got.json).toEqual(response.json);
    }
    const titled = await createConversation(token, { title: 'Only a title' });
    expect(titled).toMatchObject({ title: 'Only a title', metadata: {} });
    const tagged = await createConversation(token, { metadata: { topic: 'billing', ids: [1, 2] } });
    expect(tagged).toMatchObject({ title: null, metadata: { topic: 'billing', ids: [1, 2] } });
    // The alias without /v1 (docs/conventions.md#versions-and-paths) is the same handler.
    const alias = await call('POST', '/conversations', { token, body: { title: 'alias' } });
    expect(alias.status, alias.text).toBe(201);
    expect((await call('GET', `/conversations/${alias.json.conversation_id}`, { token })).json).toEqual(alias.json);
  });

  it('lists newest first with cursors; limit is 1..100 (else 400)', async () => {
    const { token } = await signUp(call);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await createConversation(token, { title: `c${i}` })).conversation_id);
    const newestFirst = [...ids].reverse();

    const all = await call('GET', '/v1/conversations', { token });
    expect(all.json).toMatchObject({ has_more: false, next_cursor: null });
    expect(idsOf(all.json.data)).toEqual(newestFirst);
    expect(all.json.data[0]).toEqual((await call('GET', `/v1/conversations/${ids[4]}`, { token })).json);

    const first = await call('GET', '/v1/conversations?limit=2', { token });
    expect(first.json).toMatchObject({ has_more: true, next_cursor: expect.any(String) });
    expect(idsOf(first.json.data)).toEqual(newestFirst.slice(0, 2));
    const second = await call('GET', `/v1/conversations?limit=2&after=${first.json.next_cursor}`, { token });
    expect(idsOf(second.json.data)).toEqual(newestFirst.slice(2, 4));
    const third = await call('GET', `/v1/conversations?limit=2&after=${second.json.next_cursor}`, { token });
    expect(third.json).toMatchObject({ has_more: false, next_cursor: null });
    expect(idsOf(third.json.data)).toEqual(newestFirst.slice(4));
    expect(idsOf(await listAll(token, '/v1/conversations?limit=1'))).toEqual(newestFirst);
    expect(idsOf(await listAll(token, '/v1/conversations?limit=100'))).toEqual(newestFirst);

    // Default 20: 21 conversations give a full page and one more.
    for (let i = 0; i < 16; i++) await createConversation(token);
    const defaultPage = await call('GET', '/v1/conversations', { token });
    expect(defaultPage.json.data).toHaveLength(20);
    expect(defaultPage.json.has_more).toBe(true);
    const rest = await call('GET', `/v1/conversations?after=${defaultPage.json.next_cursor}`, { token });
    expect(idsOf(rest.json.data)).toEqual([ids[0]]);

    for (const limit of ['0', '101', '-1', 'abc', '1.5']) {
      expectErrorBody(await call('GET', `/v1/conversations?limit=${limit}`, { token }), 400, 'invalid_request', 'limit');
    }
    for (const after of ['garbage', 'bm90IGEgY3Vyc29y']) {
      expectErrorBody(await call('GET', `/v1/conversations?after=${after}`, { token }), 400, 'invalid_request', 'after');
    }
  });

  it('updates the title (the metadata stays) or the metadata (replaced whole, not merged)', async () => {
    const { token } = await signUp(call);
    const created = await createConversation(token, { title: 'First', metadata: { a: 1, keep: { deep: true } } });
    const path = `/v1/conversations/${created.conversation_id}`;

    const renamed = await call('PATCH', path, { token, body: { title: 'Second' } });
    expect(renamed.status, renamed.text).toBe(200);
    expect(Object.keys(renamed.json).sort()).toEqual(conversationFields);
    expect(renamed.json).toMatchObject({ conversation_id: created.conversation_id, title: 'Second', metadata: { a: 1, keep: { deep: true } } });
    expect(renamed.json.created_at).toBe(created.created_at);
    expect(Date.parse(renamed.json.updated_at)).toBeGreaterThanOrEqual(Date.parse(created.updated_at));

    const replaced = await call('PATCH', path, { token, body: { metadata: { b: 2 } } });
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.json).toMatchObject({ title: 'Second', metadata: { b: 2 } });
    expect(replaced.json.metadata).toEqual({ b: 2 });

    const both = await call('PATCH', path, { token, body: { title: '', metadata: {} } });
    expect(both.json).toMatchObject({ title: '', metadata: {} });
    // Nothing sent, nothing changed.
    const nothing = await call('PATCH', path, { token, body: {} });
    expect(nothing.status, nothing.text).toBe(200);
    expect(nothing.json).toMatchObject({ title: '', metadata: {} });
    expect((await call('GET', path, { token })).json).toMatchObject({ title: '', metadata: {} });
  });

  it('deletes a conversation and its messages: 204, then 404 on every route', async () => {
    const { token } = await signUp(call);
    const doomed = await createConversation(token, { title: 'doomed' });
    const kept = await createConversation(token, { title: 'kept' });
    const path = `/v1/conversations/${doomed.conversation_id}`;
    for (let i = 0; i < 3; i++) await append(token, doomed.conversation_id, { role: 'user', content: `doomed ${i}` });
    const keptMessage = await append(token, kept.conversation_id, { role: 'user', content: 'kept' });

    const deleted = await call('DELETE', path, { token });
    expect(deleted.status, deleted.text).toBe(204);
    expect(deleted.text).toBe('');
    for (const [method, route, body] of [
      ['GET', path, undefined],
      ['PATCH', path, { title: 'back' }],
      ['DELETE', path, undefined],
      ['GET', `${path}/messages`, undefined],
      ['POST', `${path}/messages`, { role: 'user', content: 'too late' }],
    ] as const) {
      expectErrorBody(await call(method, route, { token, body }), 404, 'conversation_not_found', null);
    }
    expect(idsOf(await listAll(token, '/v1/conversations'))).toEqual([kept.conversation_id]);
    expect((await call('GET', `/v1/conversations/${kept.conversation_id}/messages`, { token })).json.data).toEqual([keptMessage]);
  });

  it('titles: at most 512 characters, counted in code points', async () => {
    const { token } = await signUp(call);
    // 512 emoji are 1024 UTF-16 units: still 512 characters.
    const longest = '🎉'.repeat(512);
    const created = await createConversation(token, { title: longest });
    expect(created.title).toBe(longest);
    expect((await createConversation(token, { title: 'a'.repeat(512) })).title).toBe('a'.repeat(512));
    for (const title of ['🎉'.repeat(513), 'a'.repeat(513), `${'a'.repeat(512)}é`]) {
      expectErrorBody(await call('POST', '/v1/conversations', { token, body: { title } }), 400, 'invalid_request', 'title');
      expectErrorBody(await call('PATCH', `/v1/conversations/${created.conversation_id}`, { token, body: { title } }), 400, 'invalid_request', 'title');
    }
    expectErrorBody(await call('POST', '/v1/conversations', { token, body: { title: 5 } }), 400, 'invalid_request', 'title');
    expectErrorBody(await call('PATCH', `/v1/conversations/${created.conversation_id}`, { token, body: { title: ['x'] } }), 400, 'invalid_request', 'title');
    // Refused updates changed nothing; refused creations created nothing.
    expect((await call('GET', `/v1/conversations/${created.conversation_id}`, { token })).json).toEqual(created);
    expect(await listAll(token, '/v1/conversations')).toHaveLength(2);
  });

  it('metadata: at most 4096 bytes of compact UTF-8 JSON, however the request is formatted', async () => {
    const { token } = await signUp(call);
    const exact = metadataOf(4096);
    const body = { title: 'exact', metadata: exact };
    // Pretty-printed, the body holds far more than 4096 bytes of metadata: only the compact form counts.
    const rawBody = JSON.stringify(body, null, 2);
    expect(Buffer.byteLength(rawBody)).toBeGreaterThan(4096 + 50);
    const created = await call('POST', '/v1/conversations', { token, rawBody, headers: { 'content-type': 'application/json' } });
    expect(created.status, created.text).toBe(201);
    expect(created.json.metadata).toEqual(exact);
    expect(compactBytes(created.json.metadata)).toBe(4096);
    const path = `/v1/conversations/${created.json.conversation_id}`;
    expect((await call('GET', path, { token })).json.metadata).toEqual(exact);

    // One byte more, each way a count could go wrong: a 2-byte character where UTF-16 counts 1, an
    // escaped quote or backslash, a control character escaped as \u0001 (6 bytes), an emoji
    // (2 UTF-16 units, 4 bytes), or simply one more ASCII byte.
    const oneMore = [
      { ...exact, pad: `${exact.pad.slice(1)}é` },
      { ...exact, pad: `${exact.pad.slice(1)}"` },
      { ...exact, pad: `${exact.pad.slice(1)}\\` },
      { ...exact, pad: `${exact.pad.slice(5)}\u0001` },
      { ...exact, pad: `${exact.pad.slice(3)}😀` },
      { ...exact, pad: `${exact.pad}x` },
    ];
    for (const metadata of oneMore) {
      expect(compactBytes(metadata)).toBe(4097);
      expectErrorBody(
        await call('POST', '/v1/conversations', { token, rawBody: JSON.stringify({ metadata }, null, 2), headers: { 'content-type': 'application/json' } }),
        400,
        'invalid_request',
        'metadata',
      );
      expectErrorBody(await call('PATCH', path, { token, body: { metadata } }), 400, 'invalid_request', 'metadata');
    }
    expectErrorBody(await call('POST', '/v1/conversations', { token, body: { metadata: { big: 'x'.repeat(100_000) } } }), 400, 'invalid_request', 'metadata');

    // The same limit on update: exactly 4096 passes there too, compact however it was sent.
    const other = metadataOf(4096);
    other.note = other.note.replace('quote', 'QUOTE');
    expect(compactBytes(other)).toBe(4096);
    const updated = await call('PATCH', path, {
      token,
      rawBody: JSON.stringify({ metadata: other }, null, 4),
      headers: { 'content-type': 'application/json' },
    });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.json.metadata).toEqual(other);
    // The refused ones left it as it was.
    expect((await call('GET', path, { token })).json).toMatchObject({ title: 'exact', metadata: other });
    expect(await listAll(token, '/v1/conversations')).toHaveLength(1);
  });

  it('metadata must be a JSON object (an array, string, number or boolean is a 400), without NUL characters', async () => {
    const { token } = await signUp(call);
    const created = await createConversation(token, { metadata: { kept: true } });
    const path = `/v1/conversations/${created.conversation_id}`;
    for (const metadata of [[1, 2], [], 'text', '{"a":1}', 5, 0, true]) {
      expectErrorBody(await call('POST', '/v1/conversations', { token, body: { metadata } }), 400, 'invalid_request', 'metadata');
      expectErrorBody(await call('PATCH', path, { token, body: { metadata } }), 400, 'invalid_request', 'metadata');
    }
    // Postgres cannot store a NUL in JSON: a 400 naming metadata, not a database error.
    for (const metadata of [{ a: 'x\u0000y' }, { 'k\u0000': 1 }, { deep: [{ b: '\u0000' }] }]) {
      expectErrorBody(await call('POST', '/v1/conversations', { token, body: { metadata } }), 400, 'invalid_request', 'metadata');
      expectErrorBody(await call('PATCH', path, { token, body: { metadata } }), 400, 'invalid_request', 'metadata');
    }
    expect((await call('GET', path, { token })).json).toEqual(created);
    expect(await listAll(token, '/v1/conversations')).toHaveLength(1);
  });
});

describe('messages', () => {
  it('appends messages of each role (201, the record); any other role is a 400', async () => {
    const { token } = await signUp(call);
    const conversation = await createConversation(token);
    const id = conversation.conversation_id;
    const appended: Json[] = [];
    for (const role of ['user', 'assistant', 'system', 'tool']) {
      const response = await call('POST', `/v1/conversations/${id}/messages`, { token, body: { role, content: `as ${role}` } });
      expect(response.status, response.text).toBe(201);
      expect(Object.keys(response.json).sort()).toEqual(messageFields);
      expect(response.json).toEqual({
        message_id: expect.stringMatching(/^msg_[A-Za-z0-9]+$/),
        conversation_id: id,
        role,
        content: `as ${role}`,
        created_at: expect.stringMatching(/Z$/),
      });
      appended.push(response.json);
    }
    expect((await call('GET', `/v1/conversations/${id}/messages`, { token })).json).toEqual({ data: appended, has_more: false, next_cursor: null });
    for (const role of ['User', 'USER', 'bot', 'function', 'developer', ' user', '']) {
      expectErrorBody(await call('POST', `/v1/conversations/${id}/messages`, { token, body: { role, content: 'x' } }), 400, 'invalid_request', 'role');
    }
    expectErrorBody(await call('POST', `/v1/conversations/${id}/messages`, { token, body: { content: 'x' } }), 400, 'invalid_request', 'role');
    expectErrorBody(await call('POST', `/v1/conversations/${id}/messages`, { token, body: { role: 1, content: 'x' } }), 400, 'invalid_request', 'role');
    expect((await call('GET', `/v1/conversations/${id}/messages`, { token })).json.data).toEqual(appended);
  });

  it('content: 1..200,000 characters counted in code points; missing or empty is a 400', async () => {
    const { token } = await signUp(call);
    const id = (await createConversation(token)).conversation_id;
    const path = `/v1/conversations/${id}/messages`;
    for (const body of [{ role: 'user' }, { role: 'user', content: '' }, { role: 'user', content: null }]) {
      expectErrorBody(await call('POST', path, { token, body }), 400, 'invalid_request', 'content');
    }
    expectErrorBody(await call('POST', path, { token, body: { role: 'user', content: 42 } }), 400, 'invalid_request', 'content');
    expectErrorBody(await call('POST', path, { token, body: { role: 'user', content: ['a'] } }), 400, 'invalid_request', 'content');

    // 200,000 emoji: 400,000 UTF-16 units and 800,000 bytes, but 200,000 characters.
    const emoji = '😀'.repeat(200_000);
    const longest = await call('POST', path, { token, body: { role: 'assistant', content: emoji } });
    expect(longest.status, longest.text.slice(0, 300)).toBe(201);
    expect(longest.json.content).toBe(emoji);
    const ascii = await append(token, id, { role: 'user', content: 'a'.repeat(200_000) });
    expect(ascii.content).toHaveLength(200_000);
    const one = await append(token, id, { role: 'user', content: 'a' });
    for (const content of ['😀'.repeat(200_001), 'a'.repeat(200_001), `${'a'.repeat(199_999)}😀😀`]) {
      expectErrorBody(await call('POST', path, { token, body: { role: 'user', content } }), 400, 'invalid_request', 'content');
    }
    const stored = (await call('GET', path, { token })).json.data;
    expect(stored.map((m: Json) => m.message_id)).toEqual([longest.json.message_id, ascii.message_id, one.message_id]);
    expect(stored[0].content).toBe(emoji);
  });

  it('stores content exactly: any Unicode, whitespace and markup, byte for byte', async () => {
    const { token } = await signUp(call);
    const id = (await createConversation(token)).conversation_id;
    const samples = [
      'e\u0301 a\u0308 n\u0303: combining marks, not normalized (é ≠ e\u0301)',
      'Z̷̢̛̛̤̙a̶̧̛̖l̵̨̛g̶̛o̷̧',
      'مرحبا بالعالم — שלום עולם — mixed LTR and RTL \u200f\u202etext\u202c',
      '👩‍👩‍👧‍👦 🏳️‍🌈 🇯🇵 👍🏽 1️⃣',
      '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐍈 𝄞 (astral)',
      '中文，日本語、한국어',
      'line 1\nline 2\r\nline 3\rline 4\n\n\ttabbed\u2028separator\u2029paragraph',
      '   leading and trailing whitespace   ',
      ' ',
      '\n',
      'a BOM\ufeff inside, zero\u200bwidth, no\u00a0break, soft\u00adhyphen',
      '\ufeffa leading byte-order mark',
      'control \u0001\u001f\u007f characters',
      '{"looks": "like JSON", "n": 1}',
      '<script>alert("x")</script> &amp; &lt;',
      "'; DROP TABLE messages; --",
      'back\\slash \\n not a newline, "quotes" and \'single\'',
      '$1 $& %s %d {0} $\u{7B}x} (placeholders of other languages)',
    ];
    const sent: Json[] = [];
    for (const [i, content] of samples.entries()) {
      const message = await append(token, id, { role: i % 2 === 0 ? 'user' : 'assistant', content });
      expect(message.content).toBe(content);
      expect([...message.content]).toEqual([...content]);
      sent.push(message);
    }
    const listed = await listAll(token, `/v1/conversations/${id}/messages?limit=5`);
    expect(listed).toEqual(sent);
    expect(listed.map((m) => m.content)).toEqual(samples);
  });

  it('lists oldest first by default or with ?order=asc, newest first with desc, with cursors; any other order is a 400', async () => {
    const { token } = await signUp(call);
    const id = (await createConversation(token)).conversation_id;
    const path = `/v1/conversations/${id}/messages`;
    const ids: string[] = [];
    // 12: more than 9, so an order that compared positions as text (1, 10, 11, 12, 2…) would show.
    for (let i = 0; i < 12; i++) ids.push((await append(token, id, { role: 'user', content: `m${i}` })).message_id);
    const reversed = [...ids].reverse();

    expect(idsOf((await call('GET', path, { token })).json.data, 'message_id')).toEqual(ids);
    expect(idsOf((await call('GET', `${path}?order=asc`, { token })).json.data, 'message_id')).toEqual(ids);
    expect(idsOf((await call('GET', `${path}?order=desc`, { token })).json.data, 'message_id')).toEqual(reversed);

    const first = await call('GET', `${path}?limit=5`, { token });
    expect(first.json).toMatchObject({ has_more: true, next_cursor: expect.any(String) });
    expect(idsOf(first.json.data, 'message_id')).toEqual(ids.slice(0, 5));
    const second = await call('GET', `${path}?limit=5&after=${first.json.next_cursor}`, { token });
    expect(idsOf(second.json.data, 'message_id')).toEqual(ids.slice(5, 10));
    const third = await call('GET', `${path}?limit=5&after=${second.json.next_cursor}`, { token });
    expect(third.json).toMatchObject({ has_more: false, next_cursor: null });
    expect(idsOf(third.json.data, 'message_id')).toEqual(ids.slice(10));

    const descFirst = await call('GET', `${path}?order=desc&limit=7`, { token });
    expect(idsOf(descFirst.json.data, 'message_id')).toEqual(reversed.slice(0, 7));
    const descSecond = await call('GET', `${path}?order=desc&limit=7&after=${descFirst.json.next_cursor}`, { token });
    expect(descSecond.json).toMatchObject({ has_more: false, next_cursor: null });
    expect(idsOf(descSecond.json.data, 'message_id')).toEqual(reversed.slice(7));
    expect(idsOf(await listAll(token, `${path}?limit=1`), 'message_id')).toEqual(ids);
    expect(idsOf(await listAll(token, `${path}?order=desc&limit=1`), 'message_id')).toEqual(reversed);

    for (const order of ['ASC', 'Desc', 'newest', 'oldest', 'ascending', ' asc']) {
      expectErrorBody(await call('GET', `${path}?order=${encodeURIComponent(order)}`, { token }), 400, 'invalid_request', 'order');
    }
    for (const limit of ['0', '101', '-5', 'ten']) {
      expectErrorBody(await call('GET', `${path}?limit=${limit}`, { token }), 400, 'invalid_request', 'limit');
    }
    expectErrorBody(await call('GET', `${path}?after=not-a-cursor`, { token }), 400, 'invalid_request', 'after');
    // An empty conversation lists nothing.
    const empty = (await createConversation(token)).conversation_id;
    expect((await call('GET', `/v1/conversations/${empty}/messages`, { token })).json).toEqual({ data: [], has_more: false, next_cursor: null });
  });

  it('200 concurrent appends: all 201, each stored once, every page walk sees each exactly once in one stable order; no usage recorded', async () => {
    const { token } = await signUp(call);
    const id = (await createConversation(token, { title: 'busy' })).conversation_id;
    const path = `/v1/conversations/${id}/messages`;
    const contents = Array.from({ length: 200 }, (_, i) => `concurrent #${i} ${'🧵'.repeat(i % 7)}`);
    const responses = await Promise.all(
      contents.map((content, i) => call('POST', path, { token, body: { role: i % 3 === 0 ? 'assistant' : 'user', content } })),
    );
    for (const response of responses) expect(response.status, response.text).toBe(201);
    const created = new Map<string, Json>(responses.map((response) => [response.json.message_id, response.json]));
    expect(created.size).toBe(200);
    expect(responses.map((response) => response.json.content).sort()).toEqual([...contents].sort());

    const asc100 = await listAll(token, `${path}?limit=100`);
    const asc7 = await listAll(token, `${path}?order=asc&limit=7`);
    const desc100 = await listAll(token, `${path}?order=desc&limit=100`);
    const desc7 = await listAll(token, `${path}?order=desc&limit=7`);
    const order = idsOf(asc100, 'message_id');
    expect(order).toHaveLength(200);
    expect(new Set(order).size).toBe(200);
    expect(new Set(order)).toEqual(new Set(created.keys()));
    expect(idsOf(asc7, 'message_id')).toEqual(order);
    expect(idsOf(desc100, 'message_id')).toEqual([...order].reverse());
    expect(idsOf(desc7, 'message_id')).toEqual([...order].reverse());
    // Each listed exactly as it was answered on creation.
    for (const message of asc100) expect(message).toEqual(created.get(message.message_id));
    // The first page of 100 leaves exactly 100 for the second.
    const page = await call('GET', `${path}?limit=100`, { token });
    expect(page.json.has_more).toBe(true);
    const next = await call('GET', `${path}?limit=100&after=${page.json.next_cursor}`, { token });
    expect(next.json).toMatchObject({ has_more: false, next_cursor: null });
    expect(next.json.data).toHaveLength(100);

    // Appending stores the message only: no model is called, no usage is recorded.
    const usage = await call('GET', '/v1/billing/usage?days=1', { token });
    expect(usage.status, usage.text).toBe(200);
    expect(usage.json.data.reduce((sum: number, day: Json) => sum + day.requests, 0)).toBe(0);
    expect(Number(usage.json.total_cost_usd)).toBe(0);
    expect((await call('GET', '/v1/billing/balance', { token })).json.balance_usd).toBe('1.00');
  });
});

/** An organization of `owner` that `member` joined as a developer (the invitation read from the mailbox). */
async function organizationWith(owner: User, member: User): Promise<string> {
  const name = `Org ${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const created = await call('POST', '/v1/organizations', { token: owner.token, body: { name } });
  expect(created.status, created.text).toBe(201);
  const orgId = created.json.organization.org_id as string;
  const invited = await call('POST', `/v1/organizations/${orgId}/invitations`, { token: owner.token, body: { email: member.email, role: 'developer' } });
  expect(invited.status, invited.text).toBe(201);
  const token = await mailbox.invitationToken(member.email, name);
  const accepted = await call('POST', '/v1/invitations/accept', { token: member.token, body: { token } });
  expect(accepted.status, accepted.text).toBe(200);
  return orgId;
}

describe('isolation', () => {
  it("another workspace's conversation is a 404 on every route (before any input check) and stays as it was", async () => {
    const owner = await signUp(call);
    const stranger = await signUp(call);
    const secret = `Secret plans ${Date.now()}`;
    const conversation = await createConversation(owner.token, { title: secret, metadata: { secret } });
    const message = await append(owner.token, conversation.conversation_id, { role: 'user', content: secret });
    const path = `/v1/conversations/${conversation.conversation_id}`;
    const before = (await call('GET', path, { token: owner.token })).json;

    for (const [method, route, body] of [
      ['GET', path, undefined],
      ['PATCH', path, { title: 'mine now' }],
      ['PATCH', path, { title: 'x'.repeat(513) }],
      ['PATCH', path, { metadata: { big: 'x'.repeat(5000) } }],
      ['DELETE', path, undefined],
      ['POST', `${path}/messages`, { role: 'user', content: 'intrusion' }],
      ['POST', `${path}/messages`, { role: 'intruder', content: '' }],
      ['GET', `${path}/messages`, undefined],
      ['GET', `${path}/messages?order=sideways&limit=0`, undefined],
    ] as const) {
      const response = await call(method, route, { token: stranger.token, body });
      expectErrorBody(response, 404, 'conversation_not_found', null);
      expect(response.text).not.toContain(secret);
      // Indistinguishable from a conversation that does not exist.
      const missing = await call(method, route.replace(conversation.conversation_id, 'conv_doesnotexist'), { token: stranger.token, body });
      expect({ ...response.json.error, request_id: null }).toEqual({ ...missing.json.error, request_id: null });
    }
    // A key of the stranger's workspace sees it no more than its user.
    const strangerKey = await call('POST', '/v1/keys', { token: stranger.token, body: { name: 'stranger' } });
    expectErrorBody(await call('GET', path, { token: strangerKey.json.full_key }), 404, 'conversation_not_found');
    expect(idsOf(await listAll(stranger.token, '/v1/conversations'))).not.toContain(conversation.conversation_id);

    expect((await call('GET', path, { token: owner.token })).json).toEqual(before);
    expect((await call('GET', `${path}/messages`, { token: owner.token })).json.data).toEqual([message]);
  });

  it('X-Workspace-Id: a member reads and writes the organization’s conversations; without it, only its personal ones', async () => {
    const owner = await signUp(call);
    const member = await signUp(call);
    const outsider = await signUp(call);
    const orgId = await organizationWith(owner, member);

    const personal = await createConversation(member.token, { title: 'personal' });
    const byMember = await createConversation(member.token, { title: 'org, by the member' }, orgId);
    const byOwner = await createConversation(owner.token, { title: 'org, by the owner' }, orgId);

    // With the header, both members list the organization's conversations, and only those.
    for (const user of [owner, member]) {
      expect(idsOf(await listAll(user.token, '/v1/conversations', orgId))).toEqual([byOwner.conversation_id, byMember.conversation_id]);
    }
    // Without it, each acts in its personal workspace.
    expect(idsOf(await listAll(member.token, '/v1/conversations'))).toEqual([personal.conversation_id]);
    expect(idsOf(await listAll(owner.token, '/v1/conversations'))).toEqual([]);
    expectErrorBody(await call('GET', `/v1/conversations/${byOwner.conversation_id}`, { token: member.token }), 404, 'conversation_not_found');
    expectErrorBody(await call('GET', `/v1/conversations/${personal.conversation_id}`, { token: member.token, headers: inWorkspace(orgId) }), 404);

    // The member writes in the owner's conversation of the organization, and the owner sees it.
    const message = await append(member.token, byOwner.conversation_id, { role: 'user', content: 'from the member' }, orgId);
    expectErrorBody(
      await call('POST', `/v1/conversations/${byOwner.conversation_id}/messages`, { token: member.token, body: { role: 'user', content: 'no header' } }),
      404,
      'conversation_not_found',
    );
    expect((await call('GET', `/v1/conversations/${byOwner.conversation_id}/messages`, { token: owner.token, headers: inWorkspace(orgId) })).json.data).toEqual(
      [message],
    );
    const renamed = await call('PATCH', `/v1/conversations/${byOwner.conversation_id}`, {
      token: member.token,
      headers: inWorkspace(orgId),
      body: { title: 'renamed by the member' },
    });
    expect(renamed.status, renamed.text).toBe(200);
    expect((await call('GET', `/v1/conversations/${byOwner.conversation_id}`, { token: owner.token, headers: inWorkspace(orgId) })).json.title).toBe(
      'renamed by the member',
    );
    expect((await call('DELETE', `/v1/conversations/${byMember.conversation_id}`, { token: owner.token, headers: inWorkspace(orgId) })).status).toBe(204);

    // An API key of the organization acts in it; a non-member naming the organization gets a 404.
    const key = await call('POST', '/v1/keys', { token: member.token, headers: inWorkspace(orgId), body: { name: 'org key' } });
    expect(key.status, key.text).toBe(201);
    expect(idsOf(await listAll(key.json.full_key, '/v1/conversations'))).toEqual([byOwner.conversation_id]);
    expectErrorBody(await call('GET', '/v1/conversations', { token: outsider.token, headers: inWorkspace(orgId) }), 404);
    expectErrorBody(await call('POST', '/v1/conversations', { token: outsider.token, headers: inWorkspace(orgId), body: {} }), 404);
    expect(idsOf(await listAll(owner.token, '/v1/conversations', orgId))).toEqual([byOwner.conversation_id]);
  });
});

interface Workspace extends User {
  keyId: string;
}

async function workspaceWithKey(): Promise<Workspace> {
  const user = await signUp(call);
  const key = await call('POST', '/v1/keys', { token: user.token, body: { name: 'data plane' } });
  expect(key.status, key.text).toBe(201);
  return { ...user, keyId: key.json.key.key_id };
}

let generationCounter = 0;
/** Records a generation of `ws` as the data plane does (RecordUsage) and returns its id. */
async function recordGeneration(ws: Workspace, fields: Partial<Parameters<typeof dataPlane.recordUsage>[0]> = {}): Promise<string> {
  generationCounter += 1;
  const generationId = `gen_${Date.now().toString(36)}_${generationCounter}`;
  const answer = await dataPlane.recordUsage({
    generationId,
    keyId: ws.keyId,
    workspaceId: ws.workspaceId,
    model: 'service/fast',
    routedModel: 'gpt-4o-mini',
    inputTokens: 100n,
    outputTokens: 50n,
    ...fields,
  });
  expect(answer.duplicate).toBe(false);
  return generationId;
}

const emptySummary = (days = 30) => ({ days, total: 0, thumbs_up: 0, thumbs_down: 0, by_tag: {}, by_model: {} });

describe('feedback', () => {
  it('rates a generation: 201 the feedback with the model that served it; rating it again replaces it (200, same id)', async () => {
    const ws = await workspaceWithKey();
    const generationId = await recordGeneration(ws);
    const first = await call('POST', '/v1/feedback', {
      token: ws.token,
      body: { generation_id: generationId, rating: 1, comment: 'Spot on 👌', tags: ['accurate', 'fast'] },
    });
    expect(first.status, first.text).toBe(201);
    expect(Object.keys(first.json).sort()).toEqual(feedbackFields);
    expect(first.json).toEqual({
      feedback_id: expect.stringMatching(/^fb_[A-Za-z0-9]+$/),
      generation_id: generationId,
      rating: 1,
      comment: 'Spot on 👌',
      tags: ['accurate', 'fast'],
      // The routed model of the service tier, not "service/fast".
      model: 'gpt-4o-mini',
      created_at: expect.stringMatching(/Z$/),
      updated_at: first.json.created_at,
    });

    const again = await call('POST', '/v1/feedback', { token: ws.token, body: { generation_id: generationId, rating: -1, tags: ['too_verbose'] } });
    expect(again.status, again.text).toBe(200);
    expect(again.json).toEqual({
      ...first.json,
      rating: -1,
      comment: null,
      tags: ['too_verbose'],
      updated_at: expect.any(String),
    });
    expect(Date.parse(again.json.updated_at)).toBeGreaterThanOrEqual(Date.parse(first.json.created_at));
    // Replaced, not added: the summary counts the current rating once.
    expect((await call('GET', '/v1/feedback/summary', { token: ws.token })).json).toEqual({
      days: 30,
      total: 1,
      thumbs_up: 0,
      thumbs_down: 1,
      by_tag: { too_verbose: { total: 1, thumbs_up: 0, thumbs_down: 1 } },
      by_model: { 'gpt-4o-mini': { total: 1, thumbs_up: 0, thumbs_down: 1 } },
    });
    // Through an API key of the workspace, and through the alias without /v1.
    const key = await call('POST', '/v1/keys', { token: ws.token, body: { name: 'rater' } });
    const byKey = await call('POST', '/feedback', { token: key.json.full_key, body: { generation_id: generationId, rating: 1 } });
    expect(byKey.status, byKey.text).toBe(200);
    expect(byKey.json).toMatchObject({ feedback_id: first.json.feedback_id, rating: 1, comment: null, tags: [] });
  });

  it('a generation of another workspace, or none, is a 404 generation_not_found (before the input), and nothing is stored', async () => {
    const owner = await workspaceWithKey();
    const stranger = await workspaceWithKey();
    const generationId = await recordGeneration(owner);
    for (const body of [
      { generation_id: generationId, rating: 1 },
      { generation_id: generationId, rating: 0, tags: [''] },
      { generation_id: 'gen_doesnotexist', rating: 1 },
    ]) {
      const response = await call('POST', '/v1/feedback', { token: stranger.token, body });
      expectErrorBody(response, 404, 'generation_not_found', null);
    }
    expectErrorBody(
      await call('POST', '/v1/feedback', { token: owner.token, body: { generation_id: 'gen_doesnotexist', rating: 1 } }),
      404,
      'generation_not_found',
    );
    expect((await call('GET', '/v1/feedback/summary', { token: stranger.token })).json).toEqual(emptySummary());
    expect((await call('GET', '/v1/feedback/summary', { token: owner.token })).json).toEqual(emptySummary());

    // Rated by its own workspace, the stranger still cannot see or change the rating.
    const rated = await call('POST', '/v1/feedback', { token: owner.token, body: { generation_id: generationId, rating: 1, comment: 'mine' } });
    expect(rated.status, rated.text).toBe(201);
    expectErrorBody(
      await call('POST', '/v1/feedback', { token: stranger.token, body: { generation_id: generationId, rating: -1 } }),
      404,
      'generation_not_found',
    );
    expect((await call('GET', '/v1/feedback/summary', { token: owner.token })).json).toMatchObject({ total: 1, thumbs_up: 1, thumbs_down: 0 });
    expect((await call('GET', '/v1/feedback/summary', { token: stranger.token })).json).toEqual(emptySummary());

    for (const body of [{ rating: 1 }, { generation_id: '', rating: 1 }, { generation_id: '   ', rating: 1 }]) {
      expectErrorBody(await call('POST', '/v1/feedback', { token: owner.token, body }), 400, 'invalid_request', 'generation_id');
    }
  });

  it('rating is 1 or -1: 0, 2, "1", 1.5, null, true or missing is a 400 on rating, and stores nothing', async () => {
    const ws = await workspaceWithKey();
    const generationId = await recordGeneration(ws);
    for (const rating of [0, 2, -2, '1', '-1', 1.5, null, true, undefined, [1], { up: true }]) {
      const response = await call('POST', '/v1/feedback', { token: ws.token, body: { generation_id: generationId, rating } });
      expectErrorBody(response, 400, 'invalid_request', 'rating');
    }
    expect((await call('GET', '/v1/feedback/summary', { token: ws.token })).json).toEqual(emptySummary());
    // Nothing was stored: the first valid rating is new.
    const rated = await call('POST', '/v1/feedback', { token: ws.token, body: { generation_id: generationId, rating: -1 } });
    expect(rated.status, rated.text).toBe(201);
    expect(rated.json).toMatchObject({ rating: -1, comment: null, tags: [] });
  });

  it('comment: at most 2,000 characters (code points); tags: at most 10, each 1..50 characters', async () => {
    const ws = await workspaceWithKey();
    const generationId = await recordGeneration(ws);
    const rate = (body: Record<string, unknown>) =>
      call('POST', '/v1/feedback', { token: ws.token, body: { generation_id: generationId, rating: 1, ...body } });

    // 2,000 emoji: 4,000 UTF-16 units, 2,000 characters.
    const longest = await rate({ comment: '😀'.repeat(2000) });
    expect(longest.status, longest.text).toBe(201);
    expect(longest.json.comment).toBe('😀'.repeat(2000));
    expect((await rate({ comment: 'a'.repeat(2000) })).status).toBe(200);
    expect((await rate({ comment: '' })).json.comment).toBe('');
    for (const comment of ['😀'.repeat(2001), 'a'.repeat(2001)]) expectErrorBody(await rate({ comment }), 400, 'invalid_request', 'comment');
    expectErrorBody(await rate({ comment: 5 }), 400, 'invalid_request', 'comment');

    const ten = Array.from({ length: 10 }, (_, i) => `tag${i}`);
    expect((await rate({ tags: ten })).json.tags).toEqual(ten);
    const longTags = ['🏷'.repeat(50), 'x'.repeat(50), 'x'];
    expect((await rate({ tags: longTags })).json.tags).toEqual(longTags);
    expectErrorBody(await rate({ tags: [...ten, 'eleventh'] }), 400, 'invalid_request', 'tags');
    expectErrorBody(await rate({ tags: Array(11).fill('same') }), 400, 'invalid_request', 'tags');
    expectErrorBody(await rate({ tags: ['ok', ''] }), 400, 'invalid_request', 'tags[1]');
    expectErrorBody(await rate({ tags: ['x'.repeat(51)] }), 400, 'invalid_request', 'tags[0]');
    expectErrorBody(await rate({ tags: ['a', 'b', '🏷'.repeat(51)] }), 400, 'invalid_request', 'tags[2]');
    expectErrorBody(await rate({ tags: ['ok', 5] }), 400, 'invalid_request', 'tags[1]');
    expectErrorBody(await rate({ tags: 'accurate' }), 400, 'invalid_request', 'tags');
    // The refusals left the last accepted feedback as it was.
    expect((await call('GET', '/v1/feedback/summary', { token: ws.token })).json).toMatchObject({
      total: 1,
      by_tag: { [longTags[0]]: { total: 1 }, [longTags[1]]: { total: 1 }, x: { total: 1 } },
    });
  });

  it('summarizes the workspace’s current ratings by tag and by serving model over ?days (1..365)', async () => {
    const ws = await workspaceWithKey();
    expect((await call('GET', '/v1/feedback/summary', { token: ws.token })).json).toEqual(emptySummary());
    const fastA = await recordGeneration(ws);
    const fastB = await recordGeneration(ws);
    const balanced = await recordGeneration(ws, { model: 'service/balanced', routedModel: 'acme/balanced-1' });
    const passthrough = await recordGeneration(ws, { model: 'acme/large', routedModel: undefined, upstreamCostUsd: '0.01' });
    const rate = async (generationId: string, rating: number, tags: string[] = []) => {
      const response = await call('POST', '/v1/feedback', { token: ws.token, body: { generation_id: generationId, rating, tags } });
      expect(response.status, response.text).toBeLessThan(300);
      return response.json;
    };
    await rate(fastA, 1, ['accurate']);
    await rate(fastB, 1, ['accurate', 'too_verbose']);
    await rate(fastB, -1, ['too_verbose', 'incorrect']); // replaces the thumbs up
    await rate(balanced, -1, ['irrelevant']);
    expect((await rate(passthrough, 1, ['accurate'])).model).toBe('acme/large');

    const expected = {
      days: 30,
      total: 4,
      thumbs_up: 2,
      thumbs_down: 2,
      by_tag: {
        accurate: { total: 2, thumbs_up: 2, thumbs_down: 0 },
        incorrect: { total: 1, thumbs_up: 0, thumbs_down: 1 },
        irrelevant: { total: 1, thumbs_up: 0, thumbs_down: 1 },
        too_verbose: { total: 1, thumbs_up: 0, thumbs_down: 1 },
      },
      by_model: {
        'gpt-4o-mini': { total: 2, thumbs_up: 1, thumbs_down: 1 },
        'acme/balanced-1': { total: 1, thumbs_up: 0, thumbs_down: 1 },
        'acme/large': { total: 1, thumbs_up: 1, thumbs_down: 0 },
      },
    };
    expect((await call('GET', '/v1/feedback/summary', { token: ws.token })).json).toEqual(expected);
    for (const days of [1, 7, 365]) {
      expect((await call('GET', `/v1/feedback/summary?days=${days}`, { token: ws.token })).json).toEqual({ ...expected, days });
    }
    for (const days of ['0', '366', '-1', 'abc', '1.5']) {
      expectErrorBody(await call('GET', `/v1/feedback/summary?days=${days}`, { token: ws.token }), 400, 'invalid_request', 'days');
    }
    // Another workspace's summary holds none of it.
    const other = await workspaceWithKey();
    expect((await call('GET', '/v1/feedback/summary', { token: other.token })).json).toEqual(emptySummary());
  });

  it('rates a generation right after RecordUsage, before billing.usage.recorded reaches the service (asked of billing)', async () => {
    const ws = await workspaceWithKey();
    const backlogWorkspace = await workspaceWithKey();
    // The service's consumer is held behind a usage event ahead of ours: the test inserts that
    // event's generation row in a transaction it keeps open, so the consumer's batch (one insert,
    // in stream order, one batch at a time) waits on the row lock until the test lets go.
    const backlogId = `gen_backlog_${Date.now().toString(36)}`;
    const db = new pg.Client({ connectionString: mesh.env.DATABASE_URL });
    await db.connect();
    let held = true;
    try {
      await db.query('BEGIN');
      await db.query(
        "INSERT INTO conversations.generations (generation_id, workspace_id, tier, model, occurred_at) VALUES ($1, $2, 'fast', 'held-model', now())",
        [backlogId, backlogWorkspace.workspaceId],
      );
      const bus = await EventBus.connect();
      try {
        // Sent the way billing's relay sends it.
        await bus.publish('billing.usage.recorded', backlogWorkspace.workspaceId, {
          generation_id: backlogId,
          workspace_id: backlogWorkspace.workspaceId,
          key_id: backlogWorkspace.keyId,
          model: 'service/fast',
          routed_model: 'backlog-model',
          tier: 'fast',
          cost_usd: '0',
          occurred_at: new Date().toISOString(),
        });
      } finally {
        await bus.close();
      }
      // The consumer has taken the held event and waits on its row.
      await eventually(async () => {
        const { rows } = await db.query<{ waiting: number }>(
          "SELECT count(*)::int AS waiting FROM pg_locks WHERE NOT granted AND locktype = 'transactionid' AND transactionid = txid_current()::text::xid",
        );
        return rows[0].waiting > 0 || undefined;
      }, 'the consumer to wait on the held generation');
      const generationId = await recordGeneration(ws);
      const rated = await call('POST', '/v1/feedback', { token: ws.token, body: { generation_id: generationId, rating: 1, tags: ['early'] } });
      expect(rated.status, rated.text).toBe(201);
      expect(rated.json).toMatchObject({ generation_id: generationId, model: 'gpt-4o-mini', rating: 1 });
      // Billing was asked for the generation (its event had not reached the service: the consumer
      // was held behind), under the rating's request id (docs/conventions.md#response-headers:
      // logs share it).
      const requestId = rated.headers.get('x-request-id')!;
      await eventually(
        () =>
          mesh
            .output('billing')
            .split('\n')
            .find((line) => line.includes(requestId) && line.includes('"rpc":"GetGeneration"')),
        'the GetGeneration call in the billing log',
      );
      await db.query('ROLLBACK');
      held = false;
    } finally {
      if (held) await db.query('ROLLBACK').catch(() => undefined);
      await db.end();
    }
    // Once the consumer goes on, generations known from events alone can be rated too.
    const last = await eventually(
      async () => {
        const response = await call('POST', '/v1/feedback', {
          token: backlogWorkspace.token,
          body: { generation_id: backlogId, rating: -1 },
        });
        return response.status === 201 ? response : undefined;
      },
      'the held event to be consumed',
      30_000,
      200,
    );
    expect(last.json).toMatchObject({ model: 'backlog-model', rating: -1 });
    expect((await call('GET', '/v1/feedback/summary', { token: ws.token })).json).toMatchObject({
      total: 1,
      thumbs_up: 1,
      by_tag: { early: { total: 1, thumbs_up: 1, thumbs_down: 0 } },
      by_model: { 'gpt-4o-mini': { total: 1, thumbs_up: 1, thumbs_down: 0 } },
    });
  }, 120_000);
});
