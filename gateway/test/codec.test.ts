import { create, type DescField, type JsonValue, type Message } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { GetUpgradeHintResponseSchema, UsageByTierSchema, UsageSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import {
  ConversationSchema,
  FeedbackSchema,
  FeedbackSummarySchema,
  ListConversationsResponseSchema,
} from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { AccountSchema, LoginResponseSchema, RegisterResponseSchema } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { KeySchema, ListKeysResponseSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { WebhookSchema } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { describe, expect, it } from 'vitest';
import { decodeRequest, encodeResponse, InputError } from '../src/codec.js';
import { routeFor, router } from './routes-fixture.js';

// biome-ignore lint/suspicious/noExplicitAny: decoded messages of many schemas are inspected field by field.
type DecodedRequest = Message & Record<string, any>;
// biome-ignore lint/suspicious/noExplicitAny: encoded JSON is inspected field by field.
type Json = Record<string, any>;

/** Decodes a request the way the gateway does: route and path values from the router. */
function decode(httpMethod: string, pathAndQuery: string, body?: JsonValue): DecodedRequest {
  const url = new URL(pathAndQuery, 'http://gateway');
  const match = router.match(httpMethod, url.pathname);
  if (!match || 'allowed' in match) throw new Error(`no route for ${httpMethod} ${url.pathname}`);
  return decodeRequest(match.route, match.pathValues, url.searchParams, body) as DecodedRequest;
}

/** The InputError a decode fails with (fails the test when it decodes). */
function inputError(run: () => unknown): InputError {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(InputError);
    return err as InputError;
  }
  throw new Error('expected an InputError, but the request was accepted');
}

const createdAtMs = Date.UTC(2024, 0, 2, 3, 4, 5);
const rfc3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

describe('decodeRequest', () => {
  it('decodes a register body', () => {
    const message = decode('POST', '/v1/auth/register', { email: 'ada@example.com', password: 'correct horse', full_name: 'Ada' });
    expect(message).toMatchObject({ email: 'ada@example.com', password: 'correct horse', fullName: 'Ada' });
  });

  it.each([
    [{ email: 5, password: 'pw' }, 'email'],
    [{ email: true, password: 'pw' }, 'email'],
    [{ email: ['a@b.c'], password: 'pw' }, 'email'],
    [{ email: { value: 'a@b.c' }, password: 'pw' }, 'email'],
    [{ email: 'a@b.c', password: 123 }, 'password'],
    [{ email: 'a@b.c', password: 'pw', full_name: 7 }, 'full_name'],
    // camelCase input names the field by its proto name.
    [{ email: 'a@b.c', password: 'pw', fullName: false }, 'full_name'],
  ])('answers a wrong type in %j with a 400 naming %s', (body, field) => {
    const err = inputError(() => decode('POST', '/v1/auth/register', body));
    expect(err.field).toBe(field);
    expect(err.message).toContain(field);
  });

  it('refuses a body that is not a JSON object, naming no field', () => {
    for (const body of [[], ['a'], 'text', 42, true]) {
      const err = inputError(() => decode('POST', '/v1/auth/register', body));
      expect(err.field).toBeNull();
    }
  });

  it('treats a missing body as empty', () => {
    expect(decode('POST', '/v1/auth/register', undefined)).toMatchObject({ email: '', password: '' });
  });

  it('ignores unknown fields, however deep', () => {
    const message = decode('POST', '/v1/auth/register', {
      email: 'ada@example.com',
      password: 'pw',
      role: 'admin',
      user_id: 'usr_evil',
      nested: { anything: [1, { deeper: null }] },
    });
    expect(message).toMatchObject({ email: 'ada@example.com', password: 'pw' });
    expect(Object.keys(message).sort()).toEqual(['$typeName', 'email', 'password']);
  });

  it('treats null as unset', () => {
    const update = decode('PATCH', '/v1/account', { full_name: null });
    expect(update.fullName).toBeUndefined();
    expect(decode('PATCH', '/v1/account', { full_name: 'Ada' }).fullName).toBe('Ada');
    expect(decode('PATCH', '/v1/account', { full_name: '' }).fullName).toBe('');
    expect(decode('POST', '/v1/auth/register', { email: null, password: null })).toMatchObject({ email: '', password: '' });
    expect(decode('POST', '/v1/conversations', { title: null, metadata: null }).metadata).toBeUndefined();
    // A google.protobuf.Value holds null itself: null there is not "left out".
    const autoTopup = decode('PUT', '/v1/billing/auto-topup', { low_balance_threshold_usd: null, amount_usd: '5' });
    expect(autoTopup.lowBalanceThresholdUsd?.kind.case).toBe('nullValue');
    expect(autoTopup.thresholdUsd).toBeUndefined();
  });

  it('names the list element of the wrong type (feedback tags)', () => {
    const ok = decode('POST', '/v1/feedback', { generation_id: 'gen_1', rating: -1, tags: ['accurate', 'too_verbose'] });
    expect(ok).toMatchObject({ generationId: 'gen_1', rating: -1, tags: ['accurate', 'too_verbose'] });
    expect(inputError(() => decode('POST', '/v1/feedback', { generation_id: 'gen_1', rating: 1, tags: ['ok', 5] })).field).toBe('tags[1]');
    expect(inputError(() => decode('POST', '/v1/feedback', { generation_id: 'gen_1', rating: 1, tags: [null] })).field).toBe('tags[0]');
    expect(inputError(() => decode('POST', '/v1/feedback', { generation_id: 'gen_1', rating: 1, tags: 'ok' })).field).toBe('tags');
    expect(inputError(() => decode('POST', '/v1/feedback', { generation_id: 'gen_1', rating: 1, tags: { a: 'ok' } })).field).toBe('tags');
  });

  it('checks integers (feedback rating): a 32-bit integer is a JSON number, never a string', () => {
    expect(decode('POST', '/v1/feedback', { generation_id: 'g', rating: -1 }).rating).toBe(-1);
    for (const rating of [1.5, 'one', true, [1], 2 ** 31, '1.0', '1']) {
      expect(inputError(() => decode('POST', '/v1/feedback', { generation_id: 'g', rating })).field, JSON.stringify(rating)).toBe('rating');
    }
  });

  it('takes any JSON object as a Struct and names a non-object (conversation metadata)', () => {
    const metadata = { a: { b: [1, null, 'x', true] }, n: 1.5 };
    const message = decode('POST', '/v1/conversations', { title: 'Hello', metadata });
    expect(message.title).toBe('Hello');
    expect(message.metadata).toEqual(metadata);
    for (const bad of ['x', 5, [1], true]) {
      const err = inputError(() => decode('POST', '/v1/conversations', { metadata: bad }));
      expect(err.field).toBe('metadata');
    }
    expect(inputError(() => decode('POST', '/v1/conversations', { title: 5 })).field).toBe('title');
  });

  it('accepts a JSON number or a decimal string for amount_usd (google.protobuf.Value)', () => {
    expect(decode('POST', '/v1/billing/topup', { amount_usd: 12.5, idempotency_key: 'k' }).amountUsd.kind).toEqual({ case: 'numberValue', value: 12.5 });
    expect(decode('POST', '/v1/billing/topup', { amount_usd: '12.50', idempotency_key: 'k' }).amountUsd.kind).toEqual({ case: 'stringValue', value: '12.50' });
  });

  it('reads query parameters with their types, naming the bad one', () => {
    expect(decode('GET', '/v1/conversations?limit=5&after=cur_1')).toMatchObject({ limit: 5, after: 'cur_1' });
    expect(decode('GET', '/v1/conversations').limit).toBeUndefined();
    // The last of repeated values wins; unknown parameters are ignored.
    expect(decode('GET', '/v1/conversations?limit=1&limit=7&unknown=x').limit).toBe(7);
    for (const limit of ['abc', '1.5', '', '5x', 'true']) {
      const err = inputError(() => decode('GET', `/v1/conversations?limit=${limit}`));
      expect(err.field, limit).toBe('limit');
      expect(err.message).toContain('limit');
    }
    expect(inputError(() => decode('GET', '/v1/billing/usage?days=thirty')).field).toBe('days');
  });

  it('refuses a NUL character in any text, path and query included, naming the field', () => {
    expect(inputError(() => decode('POST', '/v1/auth/register', { email: 'a\u0000@example.com', password: 'pw' })).field).toBe('email');
    expect(inputError(() => decode('GET', '/v1/organizations/org_%00x')).field).toBe('org_id');
    expect(inputError(() => decode('GET', '/v1/organizations?after=a%00')).field).toBe('after');
  });

  it("reads a body route's fields from the query string only where the proto allows it", () => {
    expect(decode('POST', '/v1/auth/logout?scope=global')).toMatchObject({ scope: 'global' });
    expect(decode('POST', '/v1/auth/logout?scope=global', { scope: 'others' })).toMatchObject({ scope: 'others' });
    // Credentials never come from a URL.
    expect(decode('POST', '/v1/auth/login?email=a%40example.com&password=secret', {})).toMatchObject({ email: '', password: '' });
  });

  it('fills path variables, which win over the body and the query', () => {
    expect(decode('GET', '/v1/conversations/conv_1').conversationId).toBe('conv_1');
    expect(decode('GET', '/v1/conversations/conv_1?conversation_id=conv_2').conversationId).toBe('conv_1');
    expect(decode('PATCH', '/v1/conversations/conv_1', { conversation_id: 'conv_evil', title: 't' })).toMatchObject({ conversationId: 'conv_1', title: 't' });
    expect(decode('PATCH', '/v1/conversations/conv_1', { conversationId: 'conv_evil' }).conversationId).toBe('conv_1');
    expect(decode('POST', '/v1/workspaces/org_1/webhooks', { workspace_id: 'org_evil', url: 'https://x.test/h', events: ['key.spend_alert'] })).toMatchObject({
      workspaceId: 'org_1',
      url: 'https://x.test/h',
      events: ['key.spend_alert'],
    });
    // Percent-decoded by the router.
    expect(decode('GET', '/v1/keys/key%2F1').keyId).toBe('key/1');
  });

  it('takes the path values it is given', () => {
    const route = routeFor('GET', '/v1/keys/{key_id}');
    const keyId = route.method.input.fields.find((f) => f.name === 'key_id') as DescField;
    const message = decodeRequest(route, new Map([[keyId, 'key_42']]), new URLSearchParams('key_id=key_other'), undefined) as Message & { keyId: string };
    expect(message.keyId).toBe('key_42');
  });
});

describe('encodeResponse', () => {
  const account = create(AccountSchema, {
    userId: 'usr_1',
    email: 'ada@example.com',
    emailVerified: false,
    twoFactorEnabled: false,
    personalWorkspaceId: 'org_1',
    createdAt: timestampFromMs(createdAtMs),
  });

  it('writes every Account field with proto names: unset full_name is null, created_at RFC 3339', () => {
    const json = encodeResponse(AccountSchema, account);
    expect(json).toEqual({
      user_id: 'usr_1',
      email: 'ada@example.com',
      email_verified: false,
      full_name: null,
      two_factor_enabled: false,
      personal_workspace_id: 'org_1',
      created_at: '2024-01-02T03:04:05Z',
    });
    expect(encodeResponse(AccountSchema, create(AccountSchema, { ...account, fullName: '', createdAt: timestampFromMs(createdAtMs + 678) }))).toMatchObject({
      full_name: '',
      created_at: '2024-01-02T03:04:05.678Z',
    });
    expect(encodeResponse(AccountSchema, create(AccountSchema, {}))).toEqual({
      user_id: '',
      email: '',
      email_verified: false,
      full_name: null,
      two_factor_enabled: false,
      personal_workspace_id: '',
      created_at: null,
    });
  });

  it('completes nested records and writes an unset message as null', () => {
    expect(encodeResponse(RegisterResponseSchema, create(RegisterResponseSchema, { user: account }))).toEqual({
      user: expect.objectContaining({ user_id: 'usr_1', full_name: null, created_at: '2024-01-02T03:04:05Z' }),
      session: null,
    });
  });

  it('leaves out an omit_if_unset string at its default (a session of the cookie mode has no refresh_token)', () => {
    const session = (refreshToken: string) =>
      (
        encodeResponse(
          RegisterResponseSchema,
          create(RegisterResponseSchema, { session: { accessToken: 'a', refreshToken, tokenType: 'Bearer', expiresIn: 900 } }),
        ) as {
          session: Record<string, unknown>;
        }
      ).session;
    expect(session('')).toEqual({ access_token: 'a', token_type: 'Bearer', expires_in: 900 });
    expect(session('r')).toEqual({ access_token: 'a', refresh_token: 'r', token_type: 'Bearer', expires_in: 900 });
  });

  it('writes an empty list response as data [], has_more false, next_cursor null', () => {
    expect(encodeResponse(ListConversationsResponseSchema, create(ListConversationsResponseSchema, {}))).toEqual({
      data: [],
      has_more: false,
      next_cursor: null,
    });
    expect(encodeResponse(ListKeysResponseSchema, create(ListKeysResponseSchema, {}))).toEqual({ data: [], has_more: false, next_cursor: null });
  });

  it('completes every element of a list', () => {
    const response = create(ListConversationsResponseSchema, {
      data: [create(ConversationSchema, { conversationId: 'conv_1', createdAt: timestampFromMs(createdAtMs) })],
      hasMore: true,
      nextCursor: 'cur_1',
    });
    expect(encodeResponse(ListConversationsResponseSchema, response)).toEqual({
      data: [{ conversation_id: 'conv_1', title: null, metadata: {}, created_at: '2024-01-02T03:04:05Z', updated_at: null }],
      has_more: true,
      next_cursor: 'cur_1',
    });
  });

  it('writes a Struct as given, {} when unset', () => {
    const metadata = { a: { b: [1, 'x', null] }, ok: true };
    expect(encodeResponse(ConversationSchema, create(ConversationSchema, { conversationId: 'c', metadata }))).toMatchObject({ metadata });
  });

  it('writes int64 fields as JSON numbers, in lists and nested records too', () => {
    const usage = create(UsageSchema, {
      days: 2,
      totalCostUsd: '1.50',
      data: [
        { date: '2024-01-01', costUsd: '0', requests: 0n, inputTokens: 0n, outputTokens: 0n },
        { date: '2024-01-02', costUsd: '1.50', requests: 3n, inputTokens: 1_234_567_890_123n, outputTokens: 42n },
      ],
    });
    const json = encodeResponse(UsageSchema, usage) as Json;
    expect(json).toEqual({
      days: 2,
      total_cost_usd: '1.50',
      data: [
        { date: '2024-01-01', cost_usd: '0', requests: 0, input_tokens: 0, output_tokens: 0, by_tier: null },
        { date: '2024-01-02', cost_usd: '1.50', requests: 3, input_tokens: 1_234_567_890_123, output_tokens: 42, by_tier: null },
      ],
    });
    expect(typeof json.data[1].input_tokens).toBe('number');
    const byTier = encodeResponse(UsageByTierSchema, create(UsageByTierSchema, { days: 30, byTier: { fast: { costUsd: '1', requests: 7n } } })) as Json;
    expect(byTier).toEqual({
      days: 30,
      by_tier: { fast: { cost_usd: '1', requests: 7 }, balanced: null, passthrough: null, byok: null },
    });
    // Nothing left that JSON cannot carry.
    expect(() => JSON.stringify(json)).not.toThrow();
  });

  it('writes maps as objects of completed records, {} when empty', () => {
    expect(encodeResponse(FeedbackSummarySchema, create(FeedbackSummarySchema, { days: 30 }))).toEqual({
      days: 30,
      total: 0,
      thumbs_up: 0,
      thumbs_down: 0,
      by_tag: {},
      by_model: {},
    });
    const summary = create(FeedbackSummarySchema, { days: 7, total: 2, thumbsUp: 2, byTag: { accurate: { total: 2, thumbsUp: 2 } } });
    expect(encodeResponse(FeedbackSummarySchema, summary)).toMatchObject({ by_tag: { accurate: { total: 2, thumbs_up: 2, thumbs_down: 0 } }, by_model: {} });
  });

  it('writes [] for an empty repeated field and null for unset optional scalars', () => {
    expect(encodeResponse(FeedbackSchema, create(FeedbackSchema, { feedbackId: 'fb_1', rating: 1 }))).toEqual({
      feedback_id: 'fb_1',
      generation_id: '',
      rating: 1,
      comment: null,
      tags: [],
      model: '',
      created_at: null,
      updated_at: null,
    });
  });

  it('leaves omit_if_unset fields out (LoginResponse)', () => {
    const session = { accessToken: 'at', refreshToken: 'rt', tokenType: 'Bearer', expiresIn: 900 };
    expect(encodeResponse(LoginResponseSchema, create(LoginResponseSchema, { session }))).toEqual({
      session: { access_token: 'at', refresh_token: 'rt', token_type: 'Bearer', expires_in: 900 },
    });
    expect(encodeResponse(LoginResponseSchema, create(LoginResponseSchema, { mfaRequired: true, mfaToken: 'mfa_1' }))).toEqual({
      mfa_required: true,
      mfa_token: 'mfa_1',
    });
    expect(encodeResponse(LoginResponseSchema, create(LoginResponseSchema, {}))).toEqual({});
  });

  it('shows a secret only when set (Key.signing_secret, Webhook.secret), nulls the rest', () => {
    const key = create(KeySchema, {
      keyId: 'key_1',
      name: 'n',
      status: 'active',
      monthToDateSpendUsd: '0',
      routingPolicy: 'any',
      createdAt: timestampFromMs(createdAtMs),
    });
    const json = encodeResponse(KeySchema, key) as Record<string, unknown>;
    expect('signing_secret' in json).toBe(false);
    expect(json).toMatchObject({ monthly_spend_cap_usd: null, alert_webhook_url: null, alert_threshold_pct: null, last_used_at: null, revoked_at: null });
    expect(encodeResponse(KeySchema, create(KeySchema, { ...key, signingSecret: 'whsec_1' }))).toMatchObject({ signing_secret: 'whsec_1' });
    expect('secret' in (encodeResponse(WebhookSchema, create(WebhookSchema, { webhookId: 'wh_1' })) as object)).toBe(false);
    expect(encodeResponse(WebhookSchema, create(WebhookSchema, { webhookId: 'wh_1', secret: 'whsec_2' }))).toMatchObject({
      secret: 'whsec_2',
      events: [],
      description: null,
    });
  });

  it('writes an empty upgrade hint as {} and its number as a JSON number', () => {
    expect(encodeResponse(GetUpgradeHintResponseSchema, create(GetUpgradeHintResponseSchema, { hint: {} }))).toEqual({ hint: {} });
    expect(encodeResponse(GetUpgradeHintResponseSchema, create(GetUpgradeHintResponseSchema, { hint: { recommendPlan: 'pro', savingsPct: 12.5 } }))).toEqual({
      hint: { recommend_plan: 'pro', savings_pct: 12.5 },
    });
  });

  it('writes timestamps as RFC 3339 UTC strings', () => {
    for (const ms of [0, createdAtMs, createdAtMs + 1, Date.UTC(2099, 11, 31, 23, 59, 59, 999)]) {
      const json = encodeResponse(AccountSchema, create(AccountSchema, { createdAt: timestampFromMs(ms) })) as { created_at: string };
      expect(json.created_at).toMatch(rfc3339);
      expect(Date.parse(json.created_at)).toBe(ms);
    }
  });
});
