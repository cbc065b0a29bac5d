import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Code } from '@connectrpc/connect';
import { EventService, WebhookService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { readDataKeys } from '@switchboard/runtime/config';
import { createDb, type Knex, migrate } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import { inProcessClients, refusalOf } from '@switchboard/runtime/in-process';
import { createLogger } from '@switchboard/runtime/log';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { Metrics } from '@switchboard/runtime/metrics';
import { recordEvent } from '@switchboard/runtime/outbox';
import { requireEnv } from '@switchboard/runtime/testing';
import { readWebhooksConfig } from '@switchboard/webhooks/config';
import { prepareWebhooks } from '@switchboard/webhooks/prepare';
import { registerRoutes } from '@switchboard/webhooks/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The webhooks handlers in this process (createRouterTransport), built as main.ts builds them on
 * a schema of their own (no dispatcher running): how each RPC maps the caller, the workspace of
 * the path, the input and the domain's answers.
 */

const schema = `webhooks_server_${randomBytes(3).toString('hex')}`;
const log = createLogger('webhooks-server-test', 'silent');
const meshTokens = new MeshTokens(randomBytes(32).toString('base64url'));
let db: Knex;
let clientAs: ReturnType<typeof inProcessClients>;

const workspaceId = newId('org');
const member = (role: string) => ({ caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role });
const endpoint = { workspaceId, url: 'https://hooks.example.com/switchboard', events: ['key.revoked'] };

beforeAll(async () => {
  db = createDb(requireEnv('DATABASE_URL'), schema, 4);
  await migrate(db, schema, fileURLToPath(new URL('../dist/migrations/', import.meta.url)));
  const handlers = prepareWebhooks(
    {
      db,
      log,
      meshTokens,
      metrics: new Metrics('webhooks-server-test'),
      config: { dataKeys: readDataKeys() },
      recordEvent: (trx, event) => recordEvent(trx, event, { producer: 'webhooks', subjectPrefix: 'test' }),
    },
    readWebhooksConfig({}),
  );
  clientAs = inProcessClients({ name: 'webhooks', meshTokens, routes: (router) => registerRoutes(router, handlers) });
});

afterAll(async () => {
  await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  await db.destroy();
});

describe('the webhooks handlers', () => {
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
