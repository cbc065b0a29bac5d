import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { EventService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { webhookEventCatalog } from '@switchboard/contracts/webhook-events';
import { createLocalCertificate, type LocalCertificate } from '@switchboard/runtime/dev/local-certificate';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { EventBus } from '@switchboard/testkit/events';
import { Mailbox } from '@switchboard/testkit/mailbox';
import { bootMesh, expectErrorBody, type RestCall, restClient, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import { verifyDelivery, WebhookReceiver } from '@switchboard/testkit/webhook-receiver';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Webhooks through REST (docs/webhooks.md#endpoints, docs/conventions.md): endpoints, signed deliveries verified with the
 * `standardwebhooks` package, retries, redelivery, recovery, rotation, disabling, the event
 * sources, and the refusals with their error bodies. Retries run on a millisecond schedule.
 */

let mesh: Mesh;
let call: RestCall;
let certificate: LocalCertificate;
let receiver: WebhookReceiver;
let bus: EventBus;
let owner: SignedUp;

beforeAll(async () => {
  certificate = await createLocalCertificate(await mkdtemp(path.join(tmpdir(), 'switchboard-cert-')));
  receiver = await WebhookReceiver.start(certificate);
  mesh = await bootMesh({
    WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
    NODE_EXTRA_CA_CERTS: certificate.certFile,
    WEBHOOK_RETRY_SCHEDULE: '50ms,100ms',
    WEBHOOK_TIMEOUT: '2s',
    WEBHOOK_LEASE: '5s',
    WEBHOOK_POLL_INTERVAL: '200ms',
    WEBHOOK_CIRCUIT_COOLDOWN: '100ms',
  });
  call = restClient(mesh.gatewayUrl);
  bus = await EventBus.connect();
  owner = await signUp(call);
});

afterAll(async () => {
  await bus?.close();
  await mesh?.stop();
  await receiver?.close();
});

let paths = 0;
/** A fresh receiver path, so each test reads only its own requests. */
const newPath = () => `/hook-${++paths}`;

async function register(user: SignedUp, body: Record<string, unknown>) {
  const response = await call('POST', `/v1/workspaces/${user.workspaceId}/webhooks`, { token: user.token, body });
  expect(response.status, response.text).toBe(201);
  return response.json as { webhook_id: string; secret: string; url: string; events: string[]; enabled: boolean };
}

async function delivery(
  user: SignedUp,
  webhookId: string,
  deliveryId: string,
  done: (d: { status: string; next_attempt_at: string | null; attempts: Array<{ trigger: string; status: string }> }) => boolean,
) {
  return eventually(
    async () => {
      const response = await call('GET', `/v1/workspaces/${user.workspaceId}/webhooks/${webhookId}/deliveries/${deliveryId}`, { token: user.token });
      expect(response.status, response.text).toBe(200);
      return done(response.json) ? response.json : undefined;
    },
    `delivery ${deliveryId}`,
    10_000,
    50,
  );
}

describe('endpoints', () => {
  it('registers an endpoint, shows its secret once, and reads, lists, updates and deletes it', async () => {
    const base = `/v1/workspaces/${owner.workspaceId}/webhooks`;
    const created = await register(owner, { url: receiver.url(newPath()), events: ['agent.completed', 'key.created'], description: 'ci' });
    expect(created.webhook_id).toMatch(/^wh_/);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(created.secret.slice(6), 'base64')).toHaveLength(32);
    expect(created).toMatchObject({ workspace_id: owner.workspaceId, enabled: true, events: ['agent.completed', 'key.created'], description: 'ci' });

    const read = await call('GET', `${base}/${created.webhook_id}`, { token: owner.token });
    expect(read.status).toBe(200);
    expect(read.json.secret).toBeUndefined();
    expect(read.json).toMatchObject({ webhook_id: created.webhook_id, disabled_reason: null, failing_since: null });

    const listed = await call('GET', `${base}?limit=100`, { token: owner.token });
    expect(listed.status).toBe(200);
    expect(listed.json.data.map((w: { webhook_id: string }) => w.webhook_id)).toContain(created.webhook_id);
    expect(listed.json.data.every((w: { secret?: string }) => w.secret === undefined)).toBe(true);

    const updated = await call('PATCH', `${base}/${created.webhook_id}`, { token: owner.token, body: { events: [], enabled: false } });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.json).toMatchObject({ events: [], enabled: false, disabled_reason: 'manual', description: 'ci' });
    expect(updated.json.disabled_at).toBeTruthy();
    const enabled = await call('PATCH', `${base}/${created.webhook_id}`, { token: owner.token, body: { enabled: true } });
    expect(enabled.json).toMatchObject({ enabled: true, disabled_reason: null, disabled_at: null });
    // A change of what reaches the URL is a security event like a change of the URL.
    const described = await call('PATCH', `${base}/${created.webhook_id}`, { token: owner.token, body: { description: 'renamed' } });
    expect(described.status, described.text).toBe(200);
    const requestId = described.headers.get('x-request-id')!;
    const auditLine = await eventually(
      async () =>
        mesh
          .output('webhooks')
          .split('\n')
          .find((line) => line.includes(requestId) && line.includes('"audit":true')),
      'the audit line of the update',
    );
    expect(JSON.parse(auditLine.slice(auditLine.indexOf('{')))).toMatchObject({
      event: 'webhook.updated',
      changed_fields: 'description',
      target_type: 'webhook',
      target_id: created.webhook_id,
    });

    expect((await call('DELETE', `${base}/${created.webhook_id}`, { token: owner.token })).status).toBe(204);
    expectErrorBody(await call('GET', `${base}/${created.webhook_id}`, { token: owner.token }), 404, 'webhook_not_found');
  });

  it('refuses bad input with the error body naming the field', async () => {
    const base = `/v1/workspaces/${owner.workspaceId}/webhooks`;
    expectErrorBody(await call('POST', base, { token: owner.token, body: { url: 'http://example.com/hook' } }), 400, undefined, 'url');
    expectErrorBody(await call('POST', base, { token: owner.token, body: {} }), 400, undefined, 'url');
    expectErrorBody(await call('POST', base, { token: owner.token, body: { url: 'https://user:pw@example.com/' } }), 400, undefined, 'url');
    expectErrorBody(
      await call('POST', base, { token: owner.token, body: { url: 'https://example.com/', events: ['agent.started'] } }),
      400,
      undefined,
      'events[0]',
    );
    expectErrorBody(
      await call('POST', base, { token: owner.token, body: { url: 'https://example.com/', events: 'agent.completed' } }),
      400,
      undefined,
      'events',
    );
    const created = await register(owner, { url: 'https://example.com/hook' });
    const one = `${base}/${created.webhook_id}`;
    expectErrorBody(await call('PATCH', one, { token: owner.token, body: { events: [1] } }), 400, undefined, 'events[0]');
    expectErrorBody(await call('PATCH', one, { token: owner.token, body: { url: 'ftp://example.com' } }), 400, undefined, 'url');
    expectErrorBody(
      await call('POST', `${one}/rotate-secret`, { token: owner.token, body: { grace_period_seconds: 604801 } }),
      400,
      undefined,
      'grace_period_seconds',
    );
    expectErrorBody(await call('POST', `${one}/recover`, { token: owner.token, body: {} }), 400, undefined, 'since');
    expectErrorBody(await call('GET', `${one}/deliveries?status=lost`, { token: owner.token }), 400, undefined, 'status');
    expectErrorBody(await call('GET', `${one}/deliveries?limit=101`, { token: owner.token }), 400, undefined, 'limit');
    expectErrorBody(await call('GET', `${one}/deliveries/dlv_nope`, { token: owner.token }), 404, 'delivery_not_found');
    expectErrorBody(await call('POST', `${one}/deliveries/dlv_nope/redeliver`, { token: owner.token }), 404, 'delivery_not_found');
  });

  it('refuses a 51st endpoint of a workspace with 422 endpoint_limit_reached', async () => {
    const org = (await call('POST', '/v1/organizations', { token: owner.token, body: { name: `Crowded ${Date.now().toString(36)}` } })).json.organization;
    const base = `/v1/workspaces/${org.org_id}/webhooks`;
    // 50 per workspace (docs/webhooks.md#limits).
    for (let i = 0; i < 50; i++) {
      const created = await call('POST', base, { token: owner.token, body: { url: `https://example.com/crowded/${i}` } });
      expect(created.status, created.text).toBe(201);
    }
    const refused = await call('POST', base, { token: owner.token, body: { url: 'https://example.com/crowded/50' } });
    expectErrorBody(refused, 422, 'endpoint_limit_reached');
    expect(refused.json.error.metadata).toEqual({ limit: 50 });
  });

  it('rate-limits the tests, redeliveries and recoveries of an endpoint together: 429 rate_limited with Retry-After', async () => {
    const created = await register(owner, { url: receiver.url(newPath()) });
    const base = `/v1/workspaces/${owner.workspaceId}/webhooks/${created.webhook_id}`;
    const tested = await call('POST', `${base}/test`, { token: owner.token });
    expect(tested.status, tested.text).toBe(202);
    // Attempted before it is redelivered (a delivery in flight would answer 409 instead).
    await delivery(owner, created.webhook_id, tested.json.delivery_id, (d) => d.status === 'succeeded');
    // 30 in any minute, whichever of the three (docs/webhooks.md#limits): 29 more tests use it up.
    for (let i = 0; i < 29; i++) expect((await call('POST', `${base}/test`, { token: owner.token })).status).toBe(202);
    const since = new Date(Date.now() - 60_000).toISOString();
    for (const [path, body] of [
      [`${base}/test`, undefined],
      [`${base}/deliveries/${tested.json.delivery_id}/redeliver`, undefined],
      [`${base}/recover`, { since }],
    ] as const) {
      const refused = await call('POST', path, { token: owner.token, body });
      expectErrorBody(refused, 429, 'rate_limited');
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(refused.json.error.metadata).toEqual({ retry_after_seconds: retryAfter });
    }
  });

  it('keeps webhooks inside their workspace: 404 for non-members and foreign keys, 403 for developers', async () => {
    const created = await register(owner, { url: 'https://example.com/private' });
    const stranger = await signUp(call);
    const base = `/v1/workspaces/${owner.workspaceId}/webhooks`;
    expectErrorBody(await call('GET', base, { token: stranger.token }), 404, 'organization_not_found');
    expectErrorBody(await call('GET', `${base}/${created.webhook_id}`, { token: stranger.token }), 404, 'organization_not_found');
    expectErrorBody(await call('POST', base, { token: stranger.token, body: { url: 'not a url' } }), 404, 'organization_not_found');
    // The stranger's own workspace does not see it either.
    expectErrorBody(
      await call('GET', `/v1/workspaces/${stranger.workspaceId}/webhooks/${created.webhook_id}`, { token: stranger.token }),
      404,
      'webhook_not_found',
    );
    const strangerKey = (await call('POST', '/v1/keys', { token: stranger.token, body: { name: 'k' } })).json.full_key;
    expectErrorBody(await call('GET', base, { token: strangerKey }), 404, 'organization_not_found');

    // An API key of the workspace works like its creator (owner here).
    const ownKey = (await call('POST', '/v1/keys', { token: owner.token, body: { name: 'k' } })).json.full_key;
    const viaKey = await call('GET', `${base}/${created.webhook_id}`, { token: ownKey });
    expect(viaKey.status, viaKey.text).toBe(200);
    // An API key naming another workspace in X-Workspace-Id is refused (docs/conventions.md#workspaces), whatever the path.
    expectErrorBody(await call('GET', base, { token: ownKey, headers: { 'x-workspace-id': stranger.workspaceId } }), 403, 'workspace_mismatch');

    // A developer of an organization may not read or manage its webhooks.
    const org = (await call('POST', '/v1/organizations', { token: owner.token, body: { name: 'Hooks Inc' } })).json.organization;
    const developer = await signUp(call);
    const invited = await call('POST', `/v1/organizations/${org.org_id}/invitations`, {
      token: owner.token,
      body: { email: developer.email, role: 'developer' },
    });
    expect(invited.status, invited.text).toBe(201);
    const token = await new Mailbox(mesh.env.MAILBOX_DIR).invitationToken(developer.email, 'Hooks Inc');
    expect((await call('POST', '/v1/invitations/accept', { token: developer.token, body: { token } })).status).toBe(200);
    const orgHooks = `/v1/workspaces/${org.org_id}/webhooks`;
    const orgHook = await call('POST', orgHooks, { token: owner.token, body: { url: 'https://example.com/org' } });
    expect(orgHook.status).toBe(201);
    expectErrorBody(await call('GET', orgHooks, { token: developer.token }), 403, 'forbidden');
    expectErrorBody(await call('POST', orgHooks, { token: developer.token, body: { url: 'bad' } }), 403, 'forbidden');
    expectErrorBody(await call('GET', `${orgHooks}/wh_missing`, { token: developer.token }), 404, 'webhook_not_found');
    expectErrorBody(await call('DELETE', `${orgHooks}/${orgHook.json.webhook_id}`, { token: developer.token }), 403, 'forbidden');
    expect((await call('GET', orgHooks, { token: owner.token })).status).toBe(200);
  });
});

describe('event catalog', () => {
  it('lists every event type with its schema and example, to a session and to a key with the read scope', async () => {
    const bySession = await call('GET', '/v1/webhook-event-types', { token: owner.token });
    expect(bySession.status, bySession.text).toBe(200);
    const data = bySession.json.data as Array<{ type: string; description: string; schema: Record<string, unknown>; example: Record<string, unknown> }>;
    expect(data.map((entry) => entry.type)).toEqual(webhookEventCatalog().map((entry) => entry.type));
    expect(data.map((entry) => entry.type)).toEqual(
      expect.arrayContaining(['agent.completed', 'webhook.test', 'webhook.delivery.exhausted', 'webhook.endpoint.recovered']),
    );
    const ajv = new Ajv2020({ strict: true });
    formats.default(ajv);
    for (const entry of data) {
      expect(entry.description, entry.type).toMatch(/\.$/);
      expect(entry.schema).toMatchObject({ $schema: 'https://json-schema.org/draft/2020-12/schema', required: ['id', 'type', 'timestamp', 'data'] });
      expect(entry.example).toMatchObject({ id: expect.stringMatching(/^evt_/), type: entry.type });
      const validate = ajv.compile(entry.schema);
      expect(validate(entry.example), `${entry.type}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    }

    const key = await call('POST', '/v1/keys', { token: owner.token, body: { name: 'catalog reader', scopes: ['read'] } });
    expect(key.status, key.text).toBe(201);
    const byKey = await call('GET', '/v1/webhook-event-types', { token: key.json.full_key });
    expect(byKey.status, byKey.text).toBe(200);
    expect(byKey.json).toEqual(bySession.json);
    expectErrorBody(await call('GET', '/v1/webhook-event-types'), 401, 'unauthenticated');
  });
});

describe('deliveries', () => {
  it('sends a test delivery at once, signed as Standard Webhooks says, and records the attempt', async () => {
    const hook = newPath();
    const created = await register(owner, { url: receiver.url(hook) });
    receiver.reply(hook, () => ({ status: 200, body: 'thanks' }));
    const tested = await call('POST', `/v1/workspaces/${owner.workspaceId}/webhooks/${created.webhook_id}/test`, { token: owner.token });
    expect(tested.status, tested.text).toBe(202);
    expect(tested.json).toMatchObject({ webhook_id: created.webhook_id, event_type: 'webhook.test', delivery_id: expect.stringMatching(/^dlv_/) });
    const done = await delivery(owner, created.webhook_id, tested.json.delivery_id, (d) => d.status === 'succeeded');
    const [request] = receiver.at(hook);
    expect(request.headers['webhook-id']).toBe(tested.json.delivery_id);
    expect(request.headers['content-type']).toBe('application/json');
    const payload = verifyDelivery(created.secret, request) as { id: string; type: string; timestamp: string; data: Record<string, unknown> };
    expect(payload).toMatchObject({ id: done.event_id, type: 'webhook.test', data: { webhook_id: created.webhook_id, workspace_id: owner.workspaceId } });
    expect(payload.id).toMatch(/^evt_/);
    expect(new Date(payload.timestamp).toISOString()).toBe(payload.timestamp);
    expect(done).toMatchObject({ attempt_count: 1, next_attempt_at: null, succeeded_at: expect.any(String) });
    expect(done.attempts).toEqual([
      expect.objectContaining({
        status: 'success',
        response_status_code: 200,
        error_class: null,
        response_body: 'thanks',
        trigger: 'test',
        url: receiver.url(hook),
      }),
    ]);
  });

  it('retries with the same webhook-id, records every attempt oldest first, and ends exhausted after N + 1', async () => {
    const flaky = newPath();
    // Subscribed to a type these tests never emit: the workspace's operational events (another
    // test's exhausted delivery) would otherwise arrive too and count as attempts. A test
    // delivery goes to the endpoint tested whatever it subscribes to.
    const first = await register(owner, { url: receiver.url(flaky), events: ['billing.dispute.lost'] });
    receiver.reply(flaky, (_request, count) => (count < 3 ? { status: 500, body: 'x'.repeat(5000) } : { status: 204 }));
    const tested = await call('POST', `/v1/workspaces/${owner.workspaceId}/webhooks/${first.webhook_id}/test`, { token: owner.token });
    const done = await delivery(owner, first.webhook_id, tested.json.delivery_id, (d) => d.status === 'succeeded');
    expect(done.attempts.map((a: { trigger: string; status: string }) => `${a.trigger}:${a.status}`)).toEqual(['test:failed', 'retry:failed', 'retry:success']);
    expect(done.attempts[0]).toMatchObject({ response_status_code: 500, error_class: 'http' });
    expect(done.attempts[0].response_body).toHaveLength(4096);
    const ids = new Set(receiver.at(flaky).map((r) => r.headers['webhook-id']));
    expect(ids).toEqual(new Set([tested.json.delivery_id]));
    for (const request of receiver.at(flaky)) verifyDelivery(first.secret, request);

    const dead = newPath();
    const second = await register(owner, { url: receiver.url(dead), events: ['billing.dispute.lost'] });
    receiver.reply(dead, () => ({ status: 503 }));
    const deadTest = await call('POST', `/v1/workspaces/${owner.workspaceId}/webhooks/${second.webhook_id}/test`, { token: owner.token });
    const exhausted = await delivery(owner, second.webhook_id, deadTest.json.delivery_id, (d) => d.status === 'exhausted');
    expect(exhausted.attempts).toHaveLength(3);
    expect(exhausted).toMatchObject({ next_attempt_at: null, attempt_count: 3 });

    // Redelivery: one manual attempt now, the same webhook-id.
    receiver.reply(dead, () => ({ status: 200 }));
    const base = `/v1/workspaces/${owner.workspaceId}/webhooks/${second.webhook_id}`;
    const redelivered = await call('POST', `${base}/deliveries/${deadTest.json.delivery_id}/redeliver`, { token: owner.token });
    expect(redelivered.status, redelivered.text).toBe(202);
    const after = await delivery(owner, second.webhook_id, deadTest.json.delivery_id, (d) => d.status === 'succeeded');
    expect(after.attempts.at(-1)).toMatchObject({ trigger: 'manual', status: 'success' });
    expect(receiver.at(dead).at(-1)?.headers['webhook-id']).toBe(deadTest.json.delivery_id);

    // Recovery: every failed or exhausted delivery since a time gets a manual attempt.
    receiver.reply(dead, () => ({ status: 500 }));
    const since = new Date(Date.now() - 1000).toISOString();
    const another = await call('POST', `${base}/test`, { token: owner.token });
    await delivery(owner, second.webhook_id, another.json.delivery_id, (d) => d.status === 'exhausted');
    receiver.reply(dead, () => ({ status: 200 }));
    const recovered = await call('POST', `${base}/recover`, { token: owner.token, body: { since } });
    expect(recovered.status, recovered.text).toBe(200);
    expect(recovered.json).toMatchObject({ requeued: 1 });
    await delivery(owner, second.webhook_id, another.json.delivery_id, (d) => d.status === 'succeeded');

    // A failed redelivery of a delivered event is recorded, but starts no automatic retries.
    receiver.reply(dead, () => ({ status: 500 }));
    const again = await call('POST', `${base}/deliveries/${another.json.delivery_id}/redeliver`, { token: owner.token });
    expect(again.status, again.text).toBe(202);
    expect(again.json.status).toBe('succeeded');
    const failedAgain = await delivery(
      owner,
      second.webhook_id,
      another.json.delivery_id,
      // Settled: a manual attempt whose lease ran out (a loaded machine) is made once more, manual too.
      (d) => d.attempts.at(-1)?.trigger === 'manual' && d.attempts.at(-1)?.status === 'failed' && d.next_attempt_at === null,
    );
    expect(failedAgain).toMatchObject({ status: 'succeeded', next_attempt_at: null });
    const sinceRecovered = failedAgain.attempts.slice(failedAgain.attempts.findLastIndex((a: { status: string }) => a.status === 'success') + 1);
    expect(sinceRecovered.map((a: { trigger: string }) => a.trigger).filter((trigger: string) => trigger !== 'manual')).toEqual([]);

    const listed = await call('GET', `${base}/deliveries?status=succeeded`, { token: owner.token });
    expect(listed.json.data.map((d: { delivery_id: string }) => d.delivery_id)).toEqual([another.json.delivery_id, deadTest.json.delivery_id]);
  });

  it('records an attempt whose response body holds bytes Postgres text cannot (NUL)', async () => {
    const binary = newPath();
    const created = await register(owner, { url: receiver.url(binary) });
    receiver.reply(binary, () => ({ status: 200, body: 'a\u0000b' }));
    const tested = await call('POST', `/v1/workspaces/${owner.workspaceId}/webhooks/${created.webhook_id}/test`, { token: owner.token });
    const done = await delivery(owner, created.webhook_id, tested.json.delivery_id, (d) => d.status === 'succeeded');
    expect(done.attempts).toEqual([expect.objectContaining({ status: 'success', response_body: 'a\ufffdb' })]);
  });

  it('treats a redirect as a failure it never follows', async () => {
    const moved = newPath();
    const target = newPath();
    const created = await register(owner, { url: receiver.url(moved) });
    receiver.reply(moved, () => ({ status: 302, headers: { location: receiver.url(target) } }));
    const tested = await call('POST', `/v1/workspaces/${owner.workspaceId}/webhooks/${created.webhook_id}/test`, { token: owner.token });
    const done = await delivery(owner, created.webhook_id, tested.json.delivery_id, (d) => d.status === 'exhausted');
    expect(done.attempts.every((a: { error_class: string; response_status_code: number }) => a.error_class === 'http' && a.response_status_code === 302)).toBe(
      true,
    );
    expect(receiver.at(target)).toHaveLength(0);
  });

  it('disables an endpoint that answers 410 and tells the workspace’s other endpoints', async () => {
    const user = await signUp(call);
    const gone = newPath();
    const watcher = newPath();
    const goneHook = await register(user, { url: receiver.url(gone) });
    const watcherHook = await register(user, { url: receiver.url(watcher), events: ['webhook.endpoint.disabled'] });
    receiver.reply(gone, () => ({ status: 410 }));
    await call('POST', `/v1/workspaces/${user.workspaceId}/webhooks/${goneHook.webhook_id}/test`, { token: user.token });
    const announced = await eventually(async () => receiver.at(watcher)[0], 'webhook.endpoint.disabled', 10_000, 50);
    const payload = verifyDelivery(watcherHook.secret, announced) as { type: string; data: Record<string, unknown> };
    expect(payload).toMatchObject({
      type: 'webhook.endpoint.disabled',
      data: { webhook_id: goneHook.webhook_id, reason: 'endpoint_gone', url: receiver.url(gone) },
    });
    const read = await call('GET', `/v1/workspaces/${user.workspaceId}/webhooks/${goneHook.webhook_id}`, { token: user.token });
    expect(read.json).toMatchObject({ enabled: false, disabled_reason: 'endpoint_gone' });
    expectErrorBody(
      await call('POST', `/v1/workspaces/${user.workspaceId}/webhooks/${goneHook.webhook_id}/test`, { token: user.token }),
      409,
      'webhook_disabled',
    );
  });

  it('signs with both secrets during a rotation’s grace period, and with the new one alone after', async () => {
    const hook = newPath();
    // Only its test deliveries arrive (see the retry test): the requests below are them, in order.
    const created = await register(owner, { url: receiver.url(hook), events: ['billing.dispute.lost'] });
    const base = `/v1/workspaces/${owner.workspaceId}/webhooks/${created.webhook_id}`;
    const rotated = await call('POST', `${base}/rotate-secret`, { token: owner.token, body: {} });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.json.secret).toMatch(/^whsec_/);
    expect(rotated.json.secret).not.toBe(created.secret);
    const first = await call('POST', `${base}/test`, { token: owner.token });
    await delivery(owner, created.webhook_id, first.json.delivery_id, (d) => d.status === 'succeeded');
    const during = receiver.at(hook)[0];
    expect(String(during.headers['webhook-signature']).split(' ')).toHaveLength(2);
    verifyDelivery(created.secret, during);
    verifyDelivery(rotated.json.secret, during);

    const again = await call('POST', `${base}/rotate-secret`, { token: owner.token, body: { grace_period_seconds: 0 } });
    const second = await call('POST', `${base}/test`, { token: owner.token });
    await delivery(owner, created.webhook_id, second.json.delivery_id, (d) => d.status === 'succeeded');
    const after = receiver.at(hook)[1];
    verifyDelivery(again.json.secret, after);
    expect(() => verifyDelivery(rotated.json.secret, after)).toThrow();
  });
});

describe('event sources', () => {
  it('delivers agent.completed from PublishEvent and from the JetStream subject, only to subscribed enabled endpoints', async () => {
    const user = await signUp(call);
    const all = newPath();
    const keysOnly = newPath();
    const disabled = newPath();
    const allHook = await register(user, { url: receiver.url(all) });
    await register(user, { url: receiver.url(keysOnly), events: ['key.created'] });
    const disabledHook = await register(user, { url: receiver.url(disabled) });
    await call('PATCH', `/v1/workspaces/${user.workspaceId}/webhooks/${disabledHook.webhook_id}`, { token: user.token, body: { enabled: false } });

    const events = meshClient(EventService, mesh.urls.webhooks, 'webhooks', { caller: 'data-plane' });
    const published = await events.publishEvent({ workspaceId: user.workspaceId, type: 'agent.completed', data: { run_id: 'run_1', ok: true } });
    expect(published.eventId).toMatch(/^evt_/);
    const received = await eventually(async () => receiver.at(all)[0], 'agent.completed', 10_000, 20);
    expect(verifyDelivery(allHook.secret, received)).toMatchObject({ type: 'agent.completed', data: { run_id: 'run_1', ok: true } });

    // What an agent runtime may publish on the subject itself.
    await bus.publishRaw('agent.completed', JSON.stringify({ workspace_id: user.workspaceId, data: { run_id: 'run_2' } }));
    const second = await eventually(async () => receiver.at(all)[1], 'agent.completed from the subject', 10_000, 20);
    expect(verifyDelivery(allHook.secret, second)).toMatchObject({ type: 'agent.completed', data: { run_id: 'run_2' } });

    await expect(events.publishEvent({ workspaceId: user.workspaceId, type: 'key.created', data: {} })).rejects.toThrow(/agent.completed/);
    // A retry with the same idempotency key is the same event: one delivery.
    const once = { workspaceId: user.workspaceId, type: 'agent.completed', data: { run_id: 'run_retried' }, idempotencyKey: 'run_retried' };
    const [firstTry, secondTry] = await Promise.all([events.publishEvent(once), events.publishEvent(once)]);
    expect(secondTry.eventId).toBe(firstTry.eventId);
    expect((await events.publishEvent(once)).eventId).toBe(firstTry.eventId);
    await expect(events.publishEvent({ ...once, idempotencyKey: '' })).rejects.toThrow(/idempotency_key/);
    // A disabled endpoint never gets what arrived meanwhile, even once enabled again.
    await call('PATCH', `/v1/workspaces/${user.workspaceId}/webhooks/${disabledHook.webhook_id}`, { token: user.token, body: { enabled: true } });
    const after = await events.publishEvent({ workspaceId: user.workspaceId, type: 'agent.completed', data: { run_id: 'run_3' } });
    const third = await eventually(async () => receiver.at(disabled)[0], 'agent.completed after re-enabling', 10_000, 20);
    expect(JSON.parse(third.body).data).toEqual({ run_id: 'run_3' });
    expect(after.eventId).toBeTruthy();
    expect(receiver.at(disabled)).toHaveLength(1);
    expect(receiver.at(all).filter((request) => JSON.parse(request.body).data.run_id === 'run_retried')).toHaveLength(1);
    expect(receiver.at(keysOnly)).toHaveLength(0);
  });

  it('delivers key.created and key.revoked, and key.spend_alert to the key’s alert URL with the key’s own secret', async () => {
    const user = await signUp(call);
    const hook = newPath();
    const alerts = newPath();
    const created = await register(user, { url: receiver.url(hook), events: ['key.created', 'key.revoked'] });
    const key = (await call('POST', '/v1/keys', { token: user.token, body: { name: 'alerting', monthly_spend_cap_usd: '1.00' } })).json.key;
    const keyCreated = await eventually(async () => receiver.at(hook)[0], 'key.created', 10_000, 20);
    expect(verifyDelivery(created.secret, keyCreated)).toMatchObject({ type: 'key.created', data: { key_id: key.key_id, workspace_id: user.workspaceId } });

    const alert = await call('PUT', `/v1/keys/${key.key_id}/alert-webhook`, { token: user.token, body: { url: receiver.url(alerts), threshold_pct: 50 } });
    expect(alert.status, alert.text).toBe(200);
    await bus.publish('billing.usage.recorded', user.workspaceId, {
      usage_id: 'usg_alert1',
      generation_id: 'gen_alert1',
      key_id: key.key_id,
      workspace_id: user.workspaceId,
      model: 'service/fast',
      tier: 'fast',
      cost_usd: '0.75',
      input_tokens: '1',
      output_tokens: '1',
      occurred_at: new Date().toISOString(),
      balance_usd: '1',
      balance_version: '1',
    });
    const spendAlert = await eventually(async () => receiver.at(alerts)[0], 'key.spend_alert', 10_000, 20);
    const payload = verifyDelivery(alert.json.signing_secret, spendAlert) as { type: string; data: Record<string, unknown> };
    expect(payload).toMatchObject({ type: 'key.spend_alert', data: { key_id: key.key_id, threshold_pct: 50, cap_usd: '1.00' } });
    expect(payload.data.alert_url).toBeUndefined();
    expect(receiver.at(hook).some((r) => JSON.parse(r.body).type === 'key.spend_alert')).toBe(false);

    await call('DELETE', `/v1/keys/${key.key_id}`, { token: user.token });
    const revoked = await eventually(async () => receiver.at(hook).find((r) => JSON.parse(r.body).type === 'key.revoked'), 'key.revoked', 10_000, 20);
    expect(verifyDelivery(created.secret, revoked)).toMatchObject({ data: { key_id: key.key_id, reason: 'revoked' } });
  });

  it('delivers organization.member.added, organization.member.removed and billing.topup.completed of the workspace', async () => {
    const name = `Events ${Date.now().toString(36)}`;
    const org = (await call('POST', '/v1/organizations', { token: owner.token, body: { name } })).json.organization;
    const hook = newPath();
    const created = await call('POST', `/v1/workspaces/${org.org_id}/webhooks`, {
      token: owner.token,
      body: { url: receiver.url(hook), events: ['organization.member.added', 'organization.member.removed', 'billing.topup.completed'] },
    });
    expect(created.status, created.text).toBe(201);
    const member = await signUp(call);
    await call('POST', `/v1/organizations/${org.org_id}/invitations`, { token: owner.token, body: { email: member.email, role: 'developer' } });
    const token = await new Mailbox(mesh.env.MAILBOX_DIR).invitationToken(member.email, name);
    expect((await call('POST', '/v1/invitations/accept', { token: member.token, body: { token } })).status).toBe(200);
    expect((await call('DELETE', `/v1/organizations/${org.org_id}/members/${member.userId}`, { token: owner.token })).status).toBe(204);
    const topup = await call('POST', '/v1/billing/topup', {
      token: owner.token,
      headers: { 'x-workspace-id': org.org_id },
      body: { amount_usd: '5.00', idempotency_key: `hooks-${org.org_id}` },
    });
    expect(topup.status, topup.text).toBe(201);
    expect((await fetch(`${topup.json.checkout_url}/complete`, { method: 'POST' })).status).toBe(200);

    const types = ['organization.member.added', 'organization.member.removed', 'billing.topup.completed'];
    const payloads = await eventually(
      async () => {
        const got = receiver.at(hook).map((request) => verifyDelivery(created.json.secret, request) as { type: string; data: Record<string, unknown> });
        return types.every((type) => got.some((payload) => payload.type === type)) ? got : undefined;
      },
      'the organization and billing events',
      10_000,
      20,
    );
    expect(payloads.find((p) => p.type === 'organization.member.added')?.data).toMatchObject({ org_id: org.org_id, user_id: member.userId, role: 'developer' });
    expect(payloads.find((p) => p.type === 'organization.member.removed')?.data).toMatchObject({ org_id: org.org_id, user_id: member.userId });
    expect(payloads.find((p) => p.type === 'billing.topup.completed')?.data).toMatchObject({ workspace_id: org.org_id, amount_usd: '5.00' });
  });

  it('disables an organization’s webhooks when it is deleted', async () => {
    const org = (await call('POST', '/v1/organizations', { token: owner.token, body: { name: 'Short lived' } })).json.organization;
    const hook = await call('POST', `/v1/workspaces/${org.org_id}/webhooks`, { token: owner.token, body: { url: 'https://example.com/org-hook' } });
    expect(hook.status).toBe(201);
    expect((await call('DELETE', `/v1/organizations/${org.org_id}`, { token: owner.token })).status).toBe(204);
    // Gone for the API; the row is kept disabled so that nothing is sent to it.
    expectErrorBody(await call('GET', `/v1/workspaces/${org.org_id}/webhooks`, { token: owner.token }), 404, 'organization_not_found');
  });
});
