import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import type { EventEnvelopeJson } from '@switchboard/runtime/consumer';
import { meshClient } from '@switchboard/runtime/testing';
import { EventBus } from '@switchboard/testkit/events';
import { type ApiResponse, expectErrorBody, meshSuiteOfFile, type SignedUp, signUp, topUp } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The audit records the services other than identity and the gateway write (docs/api/audit.md),
 * as the `audit.recorded` events on the stream (identity keeps them): one per action, in the
 * action's transaction, with the actor (type, id, address), the target, the workspace, the
 * request id of the response and the outcome, never a secret; the gateway's own refusals and a
 * lookup of another workspace's object as `access.denied`, a plain miss as nothing.
 */

const suite = meshSuiteOfFile();
let bus: EventBus;
let seen: EventEnvelopeJson[];
let owner: SignedUp;
let stranger: SignedUp;

beforeAll(async () => {
  bus = await EventBus.connect();
  seen = bus.observe('audit.recorded');
  await bus.flush();
  [owner, stranger] = await Promise.all([signUp(suite.call), signUp(suite.call)]);
});

afterAll(async () => {
  await bus?.close();
});

const requestIdOf = (response: ApiResponse) => {
  const id = response.headers.get('x-request-id');
  expect(id).toBeTruthy();
  return id as string;
};

/** The records of one request, once `count` arrived (exactly `count`: a second one would be a duplicate). */
async function recordsOf(response: ApiResponse, count = 1): Promise<EventEnvelopeJson[]> {
  const requestId = requestIdOf(response);
  const mine = () => seen.filter((event) => event.request_id === requestId);
  await expect.poll(() => mine().length, { timeout: 10_000 }).toBeGreaterThanOrEqual(count);
  expect(mine(), JSON.stringify(mine())).toHaveLength(count);
  return mine();
}

/** The one record of a request, checked against what every record must hold. */
async function recordOf(
  response: ApiResponse,
  expected: { action: string; workspaceId: string; actor: { type: string; id: string }; target: { type: string; id: string }; outcome?: string },
) {
  const [event] = await recordsOf(response);
  expect(event.workspace_id).toBe(expected.workspaceId);
  expect(event.data).toMatchObject({
    action: expected.action,
    actor_type: expected.actor.type,
    actor_id: expected.actor.id,
    target_type: expected.target.type,
    target_id: expected.target.id,
    outcome: expected.outcome ?? 'success',
  });
  if (expected.actor.type !== 'system') expect(event.data.actor_ip).toMatch(/127\.0\.0\.1|::1/);
  // Never a secret: no full key, no signing secret.
  expect(JSON.stringify(event)).not.toMatch(/sb_[A-Za-z0-9]|whsec_/);
  return event;
}

describe('audit records of keys', () => {
  it('records creating, changing, limiting, rotating and revoking a key, once each, in the caller’s workspace', async () => {
    const user = { type: 'user', id: owner.userId };
    const created = await suite.call('POST', '/v1/keys', { token: owner.token, body: { name: 'audited' } });
    expect(created.status, created.text).toBe(201);
    const keyId = created.json.key.key_id as string;
    const target = { type: 'api_key', id: keyId };
    const base = { workspaceId: owner.workspaceId, actor: user, target };
    const createdRecord = await recordOf(created, { action: 'key.created', ...base });
    expect(createdRecord.data.subject_user_id).toBe(owner.userId);
    expect(createdRecord.producer).toBe('keys');

    const renamed = await suite.call('PATCH', `/v1/keys/${keyId}`, { token: owner.token, body: { name: 'audited again', scopes: ['inference', 'read'] } });
    expect(renamed.status, renamed.text).toBe(200);
    const updated = await recordOf(renamed, { action: 'key.updated', ...base });
    expect(updated.data.metadata).toMatchObject({ changed_fields: 'name,scopes' });

    const limited = await suite.call('PUT', `/v1/keys/${keyId}/spend-limits`, {
      token: owner.token,
      body: { spend_limits: [{ period: 'day', amount_usd: '5' }] },
    });
    expect(limited.status, limited.text).toBe(200);
    await recordOf(limited, { action: 'spend_limits.updated', ...base });

    const rotated = await suite.call('POST', `/v1/keys/${keyId}/rotate`, { token: owner.token, body: { grace_period_seconds: 60 } });
    expect(rotated.status, rotated.text).toBe(201);
    const rotation = await recordOf(rotated, { action: 'key.rotated', ...base });
    expect(rotation.data.metadata).toMatchObject({ new_key_id: rotated.json.key.key_id });

    const revoked = await suite.call('DELETE', `/v1/keys/${keyId}`, { token: owner.token });
    expect(revoked.status, revoked.text).toBe(200);
    await recordOf(revoked, { action: 'key.revoked', ...base });
  });

  it('records the workspace budgets changing, with the workspace as target', async () => {
    const response = await suite.call('PUT', '/v1/billing/spend-limits', {
      token: owner.token,
      body: { spend_limits: [{ period: 'month', amount_usd: '100' }] },
    });
    expect(response.status, response.text).toBe(200);
    await recordOf(response, {
      action: 'spend_limits.updated',
      workspaceId: owner.workspaceId,
      actor: { type: 'user', id: owner.userId },
      target: { type: 'workspace', id: owner.workspaceId },
    });
  });
});

describe('audit records of webhooks', () => {
  it('records creating, changing, rotating and deleting an endpoint, never its secret', async () => {
    const base = `/v1/workspaces/${owner.workspaceId}/webhooks`;
    const created = await suite.call('POST', base, { token: owner.token, body: { url: 'https://hooks.example.com/a', events: [] } });
    expect(created.status, created.text).toBe(201);
    expect(created.json.secret ?? created.json.webhook?.secret).toBeDefined();
    const webhookId = (created.json.webhook_id ?? created.json.webhook?.webhook_id) as string;
    const expected = { workspaceId: owner.workspaceId, actor: { type: 'user', id: owner.userId }, target: { type: 'webhook', id: webhookId } };
    await recordOf(created, { action: 'webhook.created', ...expected });

    const changed = await suite.call('PATCH', `${base}/${webhookId}`, { token: owner.token, body: { url: 'https://hooks.example.com/a', description: 'ops' } });
    expect(changed.status, changed.text).toBe(200);
    const update = await recordOf(changed, { action: 'webhook.updated', ...expected });
    // The URL was sent as it was: only the description changed.
    expect(update.data.metadata).toMatchObject({ changed_fields: 'description' });

    const rotated = await suite.call('POST', `${base}/${webhookId}/rotate-secret`, { token: owner.token, body: {} });
    expect(rotated.status, rotated.text).toBe(200);
    await recordOf(rotated, { action: 'webhook.secret_rotated', ...expected });

    const deleted = await suite.call('DELETE', `${base}/${webhookId}`, { token: owner.token });
    expect(deleted.status, deleted.text).toBeLessThan(300);
    await recordOf(deleted, { action: 'webhook.deleted', ...expected });
  });
});

describe('audit records of top-ups', () => {
  it('records a completed top-up as the system’s, about the user who started it', async () => {
    const before = seen.length;
    await topUp(suite.call, owner.token, '5.00');
    const completed = () => seen.slice(before).filter((event) => event.data.action === 'topup.completed' && event.workspace_id === owner.workspaceId);
    await expect.poll(() => completed().length, { timeout: 10_000 }).toBe(1);
    const [event] = completed();
    expect(event.data).toMatchObject({ actor_type: 'system', actor_id: '', target_type: 'topup', outcome: 'success', subject_user_id: owner.userId });
    expect(event.data.target_id).toMatch(/^chk_/);
    expect(event.producer).toBe('billing');
  });
});

describe('access.denied records', () => {
  it('records the gateway refusing a key a scope it lacks (the call never reaches a service)', async () => {
    const created = await suite.call('POST', '/v1/keys', { token: owner.token, body: { name: 'inference only', scopes: ['inference'] } });
    expect(created.status, created.text).toBe(201);
    const key = { id: created.json.key.key_id as string, full: created.json.full_key as string };
    const refused = await suite.call('GET', '/v1/keys', { token: key.full });
    expectErrorBody(refused, 403, 'insufficient_scope');
    const event = await recordOf(refused, {
      action: 'access.denied',
      workspaceId: owner.workspaceId,
      actor: { type: 'api_key', id: key.id },
      target: { type: 'route', id: 'GET /v1/keys' },
      outcome: 'denied',
    });
    expect(event.producer).toBe('gateway');
    expect(event.data.metadata).toMatchObject({ reason: 'insufficient_scope', required_scope: 'read' });
    expect(event.data.subject_user_id).toBe(owner.userId);
  });

  it('records the keys service refusing a key a scope it cannot grant', async () => {
    const created = await suite.call('POST', '/v1/keys', { token: owner.token, body: { name: 'manager', scopes: ['read', 'manage'] } });
    expect(created.status, created.text).toBe(201);
    const manager = { id: created.json.key.key_id as string, full: created.json.full_key as string };
    const refused = await suite.call('POST', '/v1/keys', { token: manager.full, body: { name: 'wider', scopes: ['inference'] } });
    expectErrorBody(refused, 403, 'insufficient_scope');
    const event = await recordOf(refused, {
      action: 'access.denied',
      workspaceId: owner.workspaceId,
      actor: { type: 'api_key', id: manager.id },
      target: { type: 'rpc', id: 'switchboard.keys.v1.KeyService/CreateKey' },
      outcome: 'denied',
    });
    expect(event.producer).toBe('keys');
    expect(event.data.metadata).toMatchObject({ reason: 'insufficient_scope', required_scope: 'inference' });
  });

  it('records a lookup of another workspace’s key, webhook, conversation and generation in the caller’s workspace, answered the same 404', async () => {
    const key = await suite.call('POST', '/v1/keys', { token: owner.token, body: { name: 'probed' } });
    const hook = await suite.call('POST', `/v1/workspaces/${owner.workspaceId}/webhooks`, {
      token: owner.token,
      body: { url: 'https://hooks.example.com/p', events: [] },
    });
    const conversation = await suite.call('POST', '/v1/conversations', { token: owner.token, body: { title: 'private' } });
    expect([key.status, hook.status, conversation.status]).toEqual([201, 201, 201]);
    const keyId = key.json.key.key_id as string;
    const webhookId = (hook.json.webhook_id ?? hook.json.webhook?.webhook_id) as string;
    const conversationId = (conversation.json.conversation_id ?? conversation.json.conversation?.conversation_id) as string;
    // A generation of the owner's workspace, as a data plane reports it.
    const generationId = `gen_audit${Date.now().toString(36)}`;
    const dataPlane = meshClient(UsageService, suite.mesh.urls.billing, 'billing', { caller: 'data-plane' });
    const usage = await dataPlane.recordUsage({
      generationId,
      keyId,
      workspaceId: owner.workspaceId,
      model: 'service/fast',
      routedModel: 'gpt-4o-mini',
      inputTokens: 10n,
      outputTokens: 5n,
    });
    expect(usage.duplicate).toBe(false);

    // A plain miss first: nothing is recorded for it (checked once the probes' records arrived).
    const missing = await suite.call('GET', '/v1/keys/key_doesnotexist0000', { token: stranger.token });
    expectErrorBody(missing, 404, 'key_not_found');
    const missingGeneration = await suite.call('GET', '/v1/generations/gen_doesnotexist', { token: stranger.token });
    expectErrorBody(missingGeneration, 404, 'generation_not_found');
    const missingRated = await suite.call('POST', '/v1/feedback', { token: stranger.token, body: { generation_id: 'gen_doesnotexist', rating: 1 } });
    expectErrorBody(missingRated, 404, 'generation_not_found');
    const missingConversation = await suite.call('PATCH', '/v1/conversations/conv_doesnotexist', { token: stranger.token, body: { title: 'x' } });
    expectErrorBody(missingConversation, 404, 'conversation_not_found');

    const probes: Array<[ApiResponse, string, string, string]> = [
      [await suite.call('GET', `/v1/keys/${keyId}`, { token: stranger.token }), 'key_not_found', 'api_key', keyId],
      [await suite.call('POST', `/v1/keys/${keyId}/rotate`, { token: stranger.token, body: {} }), 'key_not_found', 'api_key', keyId],
      [await suite.call('DELETE', `/v1/keys/${keyId}`, { token: stranger.token }), 'key_not_found', 'api_key', keyId],
      [
        await suite.call('GET', `/v1/workspaces/${stranger.workspaceId}/webhooks/${webhookId}`, { token: stranger.token }),
        'webhook_not_found',
        'webhook',
        webhookId,
      ],
      [
        await suite.call('DELETE', `/v1/workspaces/${stranger.workspaceId}/webhooks/${webhookId}`, { token: stranger.token }),
        'webhook_not_found',
        'webhook',
        webhookId,
      ],
      [await suite.call('GET', `/v1/conversations/${conversationId}`, { token: stranger.token }), 'conversation_not_found', 'conversation', conversationId],
      [
        await suite.call('PATCH', `/v1/conversations/${conversationId}`, { token: stranger.token, body: { title: 'mine now' } }),
        'conversation_not_found',
        'conversation',
        conversationId,
      ],
      [
        await suite.call('GET', `/v1/conversations/${conversationId}/messages`, { token: stranger.token }),
        'conversation_not_found',
        'conversation',
        conversationId,
      ],
      [
        await suite.call('POST', `/v1/conversations/${conversationId}/messages`, { token: stranger.token, body: { role: 'user', content: 'hi' } }),
        'conversation_not_found',
        'conversation',
        conversationId,
      ],
      [await suite.call('DELETE', `/v1/conversations/${conversationId}`, { token: stranger.token }), 'conversation_not_found', 'conversation', conversationId],
      [await suite.call('GET', `/v1/generations/${generationId}`, { token: stranger.token }), 'generation_not_found', 'generation', generationId],
      [
        await suite.call('POST', '/v1/feedback', { token: stranger.token, body: { generation_id: generationId, rating: -1 } }),
        'generation_not_found',
        'generation',
        generationId,
      ],
    ];
    for (const [response, code, type, id] of probes) {
      expectErrorBody(response, 404, code);
      const event = await recordOf(response, {
        action: 'access.denied',
        workspaceId: stranger.workspaceId,
        actor: { type: 'user', id: stranger.userId },
        target: { type, id },
        outcome: 'denied',
      });
      expect(event.data.metadata).toMatchObject({ reason: 'not_found' });
    }
    for (const plain of [missing, missingGeneration, missingRated, missingConversation])
      expect(seen.filter((event) => event.request_id === requestIdOf(plain))).toEqual([]);
    // The owner's workspace holds nothing of the stranger's probes.
    expect(seen.filter((event) => event.workspace_id === owner.workspaceId && event.data.actor_id === stranger.userId)).toEqual([]);
  });
});
