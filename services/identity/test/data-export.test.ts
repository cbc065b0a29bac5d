import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { createDb, type Knex } from '@switchboard/runtime/db';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { expectLinksOpen, linksOf, Mailbox } from '@switchboard/testkit/mailbox';
import { createKey, expectErrorBody, meshSuiteOfFile, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The self-service data export through REST (docs/api/identity.md#data-export): a user with
 * sessions, a membership, invitations both ways, two keys (one revoked), a conversation with
 * messages and feedback, and audit records; another user with their own data. The export holds
 * every kind of record and nothing of the other user, no secret; the mail carries the link; the
 * other user's GET is 404; pending is 202; expired is 410 (and swept); API keys get 403.
 */

// The sweeper runs every second here, so an expired export loses its copy within the test.
const suite = meshSuiteOfFile(() => ({ DATA_EXPORT_INTERVAL: '1s' }));
let db: Knex;
let mailbox: Mailbox;

beforeAll(async () => {
  db = createDb(suite.mesh.env.DATABASE_URL, 'identity', 2);
  mailbox = new Mailbox(suite.mesh.env.MAILBOX_DIR);
});

afterAll(async () => {
  await db?.destroy();
});

// biome-ignore lint/suspicious/noExplicitAny: the JSON document of the export.
type Json = any;

interface Person extends SignedUp {
  keyIds: string[];
  fullKeys: string[];
  conversationId: string;
  messageIds: string[];
  feedbackId: string;
  auditId: string;
}

let counter = 0;
const unique = () => `${Date.now().toString(36)}${++counter}`;

/** A user with two keys (the second revoked), a conversation with two messages, a rated generation and an audit record. */
async function personWithData(): Promise<Person> {
  const { call } = suite;
  const user = await signUp(call);
  const first = await createKey(call, user.token, { name: 'first' });
  const second = await createKey(call, user.token, { name: 'second' });
  const revoked = await call('DELETE', `/v1/keys/${second.key.key_id}`, { token: user.token });
  expect(revoked.status, revoked.text).toBe(200);

  const conversation = await call('POST', '/v1/conversations', { token: user.token, body: { title: `Trip ${unique()}` } });
  expect(conversation.status, conversation.text).toBe(201);
  const conversationId = conversation.json.conversation_id as string;
  const messageIds: string[] = [];
  for (const content of [`hello ${unique()}`, `world ${unique()}`]) {
    const message = await call('POST', `/v1/conversations/${conversationId}/messages`, { token: user.token, body: { role: 'user', content } });
    expect(message.status, message.text).toBe(201);
    messageIds.push(message.json.message_id);
  }

  const generationId = `gen_${unique()}`;
  const dataPlane = meshClient(UsageService, suite.mesh.urls.billing, 'billing', { caller: 'data-plane' });
  await dataPlane.recordUsage({
    generationId,
    keyId: first.key.key_id as string,
    workspaceId: user.workspaceId,
    model: 'service/fast',
    routedModel: 'gpt-4o-mini',
    inputTokens: 10n,
    outputTokens: 5n,
  });
  const feedback = await eventually(async () => {
    const answer = await call('POST', '/v1/feedback', { token: user.token, body: { generation_id: generationId, rating: 1, tags: ['accurate'] } });
    return answer.status === 201 ? answer : undefined;
  }, 'feedback on the new generation');

  const auditId = `aud_test${unique()}`;
  await db('audit_events').insert({
    id: auditId,
    workspace_id: user.workspaceId,
    action: 'user.signed_in',
    actor_type: 'user',
    actor_id: user.userId,
    outcome: 'success',
    subject_user_id: user.userId,
    producer: 'identity',
    created_at: new Date(),
  });
  return {
    ...user,
    keyIds: [first.key.key_id as string, second.key.key_id as string],
    fullKeys: [first.fullKey, second.fullKey],
    conversationId,
    messageIds,
    feedbackId: feedback.json.feedback_id,
    auditId,
  };
}

async function requestExport(token: string) {
  const response = await suite.call('POST', '/v1/account/export', { token });
  expect(response.status, response.text).toBe(202);
  return response;
}

let alice: Person;
let bob: Person;
let organizer: SignedUp;
let exportId: string;
let document: Json;
let documentText: string;

describe('the data export', () => {
  beforeAll(async () => {
    const { call } = suite;
    [alice, bob, organizer] = await Promise.all([personWithData(), personWithData(), signUp(call)]);
    // A second session of alice.
    const login = await call('POST', '/v1/auth/login', { body: { email: alice.email, password: alice.password } });
    expect(login.status, login.text).toBe(200);
    // Alice joins the organizer's organization (an invitation received) and invites someone to her own (one sent).
    const theirs = await call('POST', '/v1/organizations', { token: organizer.token, body: { name: `Theirs ${unique()}` } });
    const invited = await call('POST', `/v1/organizations/${theirs.json.organization.org_id}/invitations`, {
      token: organizer.token,
      body: { email: alice.email, role: 'developer' },
    });
    expect(invited.status, invited.text).toBe(201);
    const accepted = await call('POST', '/v1/invitations/accept', {
      token: alice.token,
      body: { token: await mailbox.invitationToken(alice.email, theirs.json.organization.name) },
    });
    expect(accepted.status, accepted.text).toBe(200);
    const hers = await call('POST', '/v1/organizations', { token: alice.token, body: { name: `Hers ${unique()}` } });
    const sent = await call('POST', `/v1/organizations/${hers.json.organization.org_id}/invitations`, {
      token: alice.token,
      body: { email: `friend-${unique()}@example.com`, role: 'admin' },
    });
    expect(sent.status, sent.text).toBe(201);

    const requested = await requestExport(alice.token);
    expect(requested.json).toEqual({ export_id: expect.stringMatching(/^exp_/), status: 'pending', created_at: expect.any(String), expires_at: null });
    exportId = requested.json.export_id;
  });

  it('mails a link to the dashboard page of the export when it is ready, and the API route answers the document', async () => {
    const mail = await mailbox.waitFor((m) => m.kind === 'data_export_ready' && m.to === alice.email, 'the data export of alice', 20_000);
    // The link opens in a browser without credentials: the dashboard's page, which downloads with the session.
    await expectLinksOpen(mail);
    expect(linksOf(mail).text).toEqual([`${suite.mesh.env.PUBLIC_BASE_URL}/app/account/exports/${exportId}`]);
    expect(mail.text).toContain(`GET ${suite.mesh.env.PUBLIC_BASE_URL}/v1/account/exports/${exportId} `);
    const response = await suite.call('GET', `/v1/account/exports/${exportId}`, { token: alice.token });
    expect(response.status, response.text).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    document = response.json;
    documentText = response.text;
  });

  it('holds every kind of record of the user', () => {
    expect(document).toMatchObject({ export_id: exportId, format_version: 1, account: { user_id: alice.userId, email: alice.email } });
    expect(document.sessions.length).toBeGreaterThanOrEqual(2);
    expect(document.memberships.map((m: Json) => m.role).sort()).toEqual(['developer', 'owner', 'owner']);
    expect(document.invitations.map((i: Json) => i.direction).sort()).toEqual(['received', 'sent']);
    expect(document.keys.map((k: Json) => k.key_id).sort()).toEqual([...alice.keyIds].sort());
    expect(document.keys.map((k: Json) => k.status).sort()).toEqual(['active', 'revoked']);
    expect(document.keys.every((k: Json) => k.workspace_id === alice.workspaceId && k.created_by === alice.userId)).toBe(true);
    expect(document.conversations).toHaveLength(1);
    expect(document.conversations[0]).toMatchObject({ conversation_id: alice.conversationId, workspace_id: alice.workspaceId });
    expect(document.conversations[0].messages.map((m: Json) => m.message_id)).toEqual(alice.messageIds);
    expect(document.feedback.map((f: Json) => f.feedback_id)).toEqual([alice.feedbackId]);
    expect(document.audit_events.map((a: Json) => a.event_id)).toContain(alice.auditId);
    expect(Object.values(document.truncated).every((flag) => flag === false)).toBe(true);
  });

  it('holds nothing of another user and no secret', async () => {
    for (const value of [bob.userId, bob.email, bob.workspaceId, bob.conversationId, bob.feedbackId, bob.auditId, ...bob.keyIds, ...bob.messageIds]) {
      expect(documentText, value).not.toContain(value);
    }
    for (const secret of [...alice.fullKeys, alice.password, alice.token]) expect(documentText).not.toContain(secret);
    expect(documentText).not.toMatch(/password_hash|token_hash|key_hash|refresh_token|secret|argon2/);
    // Stored encrypted under the data keys, not as readable JSON.
    const row = await db('data_exports').where({ id: exportId }).first('document_encrypted', 'status', 'expires_at', 'ready_at');
    expect(row.status).toBe('ready');
    expect(row.document_encrypted).toMatch(/^v2\./);
    expect(row.document_encrypted).not.toContain(alice.email);
    expect(row.expires_at.getTime() - row.ready_at.getTime()).toBe(7 * 24 * 3600 * 1000);
  });

  it('wrote the account.export_requested audit record in the request, in the personal workspace', async () => {
    const rows = await db('outbox').whereRaw(`payload->>'type' = 'audit.recorded' AND payload->'data'->>'target_id' = ?`, [exportId]).select('payload');
    expect(rows.map((row: { payload: Json }) => row.payload)).toEqual([
      expect.objectContaining({
        workspace_id: alice.workspaceId,
        data: expect.objectContaining({
          action: 'account.export_requested',
          actor_type: 'user',
          actor_id: alice.userId,
          target_type: 'export',
          subject_user_id: alice.userId,
        }),
      }),
    ]);
  });

  it('is 404 to another user, and for an unknown id', async () => {
    expectErrorBody(await suite.call('GET', `/v1/account/exports/${exportId}`, { token: bob.token }), 404, 'export_not_found');
    expectErrorBody(await suite.call('GET', '/v1/account/exports/exp_unknown', { token: alice.token }), 404, 'export_not_found');
  });

  it('answers 202 {export_id, status} while pending, and the pending one again to a new request', async () => {
    // A pending export whose build is not due yet (as while the worker retries it).
    const id = `exp_pending${unique()}`;
    await db('data_exports').insert({ id, user_id: bob.userId, status: 'pending', next_attempt_at: new Date(Date.now() + 3_600_000), created_at: new Date() });
    const pending = await suite.call('GET', `/v1/account/exports/${id}`, { token: bob.token });
    expect(pending.status, pending.text).toBe(202);
    expect(pending.json).toEqual({ export_id: id, status: 'pending' });
    const again = await requestExport(bob.token);
    expect(again.json).toMatchObject({ export_id: id, status: 'pending', expires_at: null });
  });

  it('refuses API keys: 403 user_session_required', async () => {
    expectErrorBody(await suite.call('POST', '/v1/account/export', { token: alice.fullKeys[0] }), 403, 'user_session_required');
    expectErrorBody(await suite.call('GET', `/v1/account/exports/${exportId}`, { token: alice.fullKeys[0] }), 403, 'user_session_required');
  });

  it('is 410 once expired, before and after the sweeper deletes its copy', async () => {
    await db('data_exports')
      .where({ id: exportId })
      .update({ expires_at: new Date(Date.now() - 1000) });
    expectErrorBody(await suite.call('GET', `/v1/account/exports/${exportId}`, { token: alice.token }), 410, 'export_expired');
    await eventually(async () => {
      const row = await db('data_exports').where({ id: exportId }).first('status', 'document_encrypted');
      return row.status === 'expired' && row.document_encrypted === null ? row : undefined;
    }, 'the sweeper deleting the expired copy');
    expectErrorBody(await suite.call('GET', `/v1/account/exports/${exportId}`, { token: alice.token }), 410, 'export_expired');
  });
});
