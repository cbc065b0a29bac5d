import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, type ConnectError } from '@connectrpc/connect';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { EventService, WebhookService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService, refusalOf } from '@switchboard/runtime/in-process';
import { eventually } from '@switchboard/runtime/testing';
import { readWebhooksConfig } from '@switchboard/webhooks/config';
import { prepareWebhooks } from '@switchboard/webhooks/prepare';
import { registerRoutes } from '@switchboard/webhooks/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The webhooks handlers in this process (createRouterTransport), built as main.ts builds them on
 * a schema of their own (no dispatcher running): how each RPC maps the caller, the workspace of
 * the path, the input and the domain's answers.
 */

let service: InProcessService;
let clientAs: ReturnType<InProcessService['serve']>;

const workspaceId = newId('org');
const member = (role: string) => ({ caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role });
const endpoint = { workspaceId, url: 'https://hooks.example.com/switchboard', events: ['key.revoked'] };

beforeAll(async () => {
  service = await inProcessService('webhooks', new URL('../dist/migrations/', import.meta.url));
  const handlers = prepareWebhooks(service.runtime, readWebhooksConfig({}));
  clientAs = service.serve((router) => registerRoutes(router, handlers));
});

afterAll(() => service?.stop());

describe('the webhooks handlers', () => {
  it('refuse to start on a malformed setting, naming it', () => {
    expect(() => readWebhooksConfig({ WEBHOOK_MAX_IN_FLIGHT: '-1' })).toThrow(/WEBHOOK_MAX_IN_FLIGHT/);
    expect(() => readWebhooksConfig({ WEBHOOK_LEASE: '10s', WEBHOOK_TIMEOUT: '15s' })).toThrow(/WEBHOOK_LEASE/);
    expect(() => readWebhooksConfig({ WEBHOOK_DNS_SERVERS: '127.0.0.1:53, not-an-address' })).toThrow(/WEBHOOK_DNS_SERVERS/);
    expect(readWebhooksConfig({ WEBHOOK_DNS_SERVERS: '127.0.0.1:5353, [::1]:53' }).dnsServers).toEqual(['127.0.0.1:5353', '[::1]:53']);
    expect(() => readWebhooksConfig({ WEBHOOK_WORKSPACE_CONCURRENCY: '0' })).toThrow(/WEBHOOK_WORKSPACE_CONCURRENCY/);
  });

  it('create a webhook with its secret once, then read it without the secret', async () => {
    const webhooks = clientAs(WebhookService, member('admin'));
    const created = await webhooks.createWebhook(endpoint);
    expect(created).toMatchObject({ url: endpoint.url, events: endpoint.events, enabled: true });
    expect(created.secret).toMatch(/^whsec_/);
    const read = await webhooks.getWebhook({ workspaceId, webhookId: created.webhookId });
    expect(read).toMatchObject({ webhookId: created.webhookId, url: endpoint.url });
    expect(read.secret).toBeUndefined();
  });

  it('name the field of invalid input', async () => {
    const webhooks = clientAs(WebhookService, member('owner'));
    expect(await refusalOf(webhooks.createWebhook({ ...endpoint, url: 'http://hooks.example.com' }))).toMatchObject({
      code: Code.InvalidArgument,
      field: 'url',
    });
    expect(await refusalOf(webhooks.createWebhook({ ...endpoint, events: ['no.such_event'] }))).toMatchObject({
      code: Code.InvalidArgument,
      field: 'events[0]',
    });
  });

  it('answer 404 for another workspace in the path or an unknown webhook, 403 for a developer', async () => {
    const webhooks = clientAs(WebhookService, member('admin'));
    expect(await refusalOf(webhooks.listWebhooks({ workspaceId: newId('org') }))).toEqual({ code: Code.NotFound, error: 'organization_not_found', field: '' });
    expect(await refusalOf(webhooks.getWebhook({ workspaceId, webhookId: newId('wh') }))).toMatchObject({ code: Code.NotFound, error: 'webhook_not_found' });
    expect(await refusalOf(clientAs(WebhookService, member('developer')).createWebhook(endpoint))).toMatchObject({
      code: Code.PermissionDenied,
      error: 'forbidden',
    });
  });

  it('refuse a 51st endpoint in a workspace with 422 endpoint_limit_reached, also when the registrations race', async () => {
    const crowded = newId('org');
    const admin = clientAs(WebhookService, { ...member('admin'), workspaceId: crowded });
    const register = (i: number) => admin.createWebhook({ workspaceId: crowded, url: `https://hooks.example.com/${i}`, events: [] });
    // 60 at once: exactly 50 get in, whichever they are.
    const outcomes = await Promise.allSettled(Array.from({ length: 60 }, (_, i) => register(i)));
    const created = outcomes.filter((outcome) => outcome.status === 'fulfilled').map((outcome) => outcome.value);
    expect(created).toHaveLength(50);
    for (const outcome of outcomes.filter((outcome) => outcome.status === 'rejected')) {
      expect(await refusalOf(Promise.reject(outcome.reason))).toEqual({ code: Code.FailedPrecondition, error: 'endpoint_limit_reached', field: '' });
    }
    // Disabled endpoints count; deleting one makes room for one; other workspaces have their own 50.
    await admin.updateWebhook({ workspaceId: crowded, webhookId: created[0].webhookId, enabled: false });
    expect(await refusalOf(register(60))).toMatchObject({ error: 'endpoint_limit_reached' });
    await admin.deleteWebhook({ workspaceId: crowded, webhookId: created[1].webhookId });
    await register(61);
    expect(await refusalOf(register(62))).toMatchObject({ error: 'endpoint_limit_reached' });
    expect(await clientAs(WebhookService, member('admin')).createWebhook(endpoint)).toMatchObject({ url: endpoint.url });
  });

  it('rate-limit tests, redeliveries and recoveries together, per endpoint, with Retry-After', async () => {
    const webhooks = clientAs(WebhookService, member('owner'));
    // Nothing resolves under .invalid: each attempt fails at once, and the delivery waits for its retry (seconds).
    const unreachable = { ...endpoint, url: 'https://hooks.invalid/switchboard' };
    const [busy, quiet] = [await webhooks.createWebhook(unreachable), await webhooks.createWebhook(unreachable)];
    const since = timestampFromDate(new Date(Date.now() - 60_000));
    const tested = await webhooks.testWebhook({ workspaceId, webhookId: busy.webhookId });
    await eventually(
      async () => (await webhooks.getDelivery({ workspaceId, webhookId: busy.webhookId, deliveryId: tested.deliveryId })).attempts.length > 0,
      'the test delivery’s first attempt',
    );
    // 30 a minute by default, whichever of the three: a test and a redelivery so far, then 14 recoveries and 14 more tests.
    await webhooks.redeliverDelivery({ workspaceId, webhookId: busy.webhookId, deliveryId: tested.deliveryId });
    for (let i = 0; i < 14; i++) await webhooks.recoverDeliveries({ workspaceId, webhookId: busy.webhookId, since });
    for (let i = 0; i < 14; i++) await webhooks.testWebhook({ workspaceId, webhookId: busy.webhookId });
    for (const call of [
      () => webhooks.testWebhook({ workspaceId, webhookId: busy.webhookId }),
      () => webhooks.redeliverDelivery({ workspaceId, webhookId: busy.webhookId, deliveryId: tested.deliveryId }),
      () => webhooks.recoverDeliveries({ workspaceId, webhookId: busy.webhookId, since }),
    ]) {
      const refused = await call().then(
        () => undefined,
        (err: unknown) => err as ConnectError,
      );
      expect(refused?.code).toBe(Code.ResourceExhausted);
      expect(refused?.findDetails(ErrorDetailSchema)[0]).toMatchObject({ code: 'rate_limited', metadata: { retry_after_seconds: expect.any(Number) } });
      const retryAfter = Number(refused?.metadata.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
    }
    // The refused calls queued nothing: one test delivery per successful test call.
    const deliveries = await webhooks.listDeliveries({ workspaceId, webhookId: busy.webhookId, limit: 100 });
    expect(deliveries.data).toHaveLength(15);
    // Another endpoint of the same workspace has its own budget.
    await webhooks.testWebhook({ workspaceId, webhookId: quiet.webhookId });
  });

  it('keep PublishEvent to the data plane', async () => {
    const publish = clientAs(EventService, member('owner')).publishEvent({ workspaceId, type: 'key.revoked', idempotencyKey: 'k' });
    expect(await refusalOf(publish)).toMatchObject({ code: Code.PermissionDenied });
  });
});
