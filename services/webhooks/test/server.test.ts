import { Code } from '@connectrpc/connect';
import { EventService, WebhookService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService, refusalOf } from '@switchboard/runtime/in-process';
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

  it('keep PublishEvent to the data plane', async () => {
    const publish = clientAs(EventService, member('owner')).publishEvent({ workspaceId, type: 'key.revoked', idempotencyKey: 'k' });
    expect(await refusalOf(publish)).toMatchObject({ code: Code.PermissionDenied });
  });
});
