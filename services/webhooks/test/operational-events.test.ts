import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { EventService, WebhookService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { createDb, type Knex } from '@switchboard/runtime/db';
import { createLocalCertificate } from '@switchboard/runtime/dev/local-certificate';
import { newId } from '@switchboard/runtime/ids';
import { eventually, requireEnv, ServiceUnderTest } from '@switchboard/runtime/testing';
import { WebhookReceiver } from '@switchboard/testkit/webhook-receiver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The operational events (docs/webhooks.md#event-types) end to end: the webhooks service on the
 * test run's Postgres and NATS, delivering to a local HTTPS receiver on a millisecond retry
 * schedule. `webhook.delivery.exhausted` and `webhook.endpoint.recovered` travel through the
 * outbox and the stream back into the fan-out, which leaves out the endpoint they are about.
 * Where an event must not exist, the outbox is read once the state that would have written it (in
 * the same transaction) is committed.
 */

const service = new ServiceUnderTest(new URL('../dist/src/main.js', import.meta.url), 'webhooks');
let receiver: WebhookReceiver;
let certificateDir: string;
let db: Knex;

beforeAll(async () => {
  certificateDir = await mkdtemp(path.join(tmpdir(), 'webhooks-operational-'));
  const certificate = await createLocalCertificate(certificateDir);
  receiver = await WebhookReceiver.start(certificate);
  await service.start({
    env: {
      WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
      NODE_EXTRA_CA_CERTS: certificate.certFile,
      WEBHOOK_RETRY_SCHEDULE: '20ms',
      WEBHOOK_TIMEOUT: '2s',
      WEBHOOK_LEASE: '5s',
      WEBHOOK_POLL_INTERVAL: '100ms',
      // The circuit stays closed: these receivers fail on purpose, and every attempt should run at once.
      WEBHOOK_CIRCUIT_THRESHOLD: '1000',
    },
  });
  db = createDb(requireEnv('DATABASE_URL'), 'webhooks', 2);
});

afterAll(async () => {
  await service.stop();
  await db?.destroy();
  await receiver?.close();
  await rm(certificateDir, { recursive: true, force: true });
});

interface Payload {
  type: string;
  data: Record<string, unknown>;
}

/** A workspace of its own with endpoints at receiver paths of their own. */
async function workspace(...endpoints: Array<{ name: string; events?: string[]; fails?: boolean }>) {
  const workspaceId = newId('org');
  const claims = { caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role: 'owner' };
  const webhooks = service.client(WebhookService, claims);
  const ids: Record<string, string> = {};
  const failing = new Set<string>();
  for (const endpoint of endpoints) {
    const hookPath = `/${workspaceId}/${endpoint.name}`;
    if (endpoint.fails) failing.add(hookPath);
    receiver.reply(hookPath, () => (failing.has(hookPath) ? { status: 500, body: 'down' } : { status: 200, body: 'ok' }));
    const created = await webhooks.createWebhook({ workspaceId, url: receiver.url(hookPath), events: endpoint.events ?? [] });
    ids[endpoint.name] = created.webhookId;
  }
  return {
    workspaceId,
    ids,
    /** The endpoint answers 200 from now on. */
    heal: (name: string) => failing.delete(`/${workspaceId}/${name}`),
    publish: (data: Record<string, string>) =>
      service.client(EventService, { caller: 'data-plane' }).publishEvent({ workspaceId, type: 'agent.completed', data }),
    /** What the endpoint's receiver got of `type`. */
    received: (name: string, type: string) =>
      receiver
        .at(`/${workspaceId}/${name}`)
        .map((request) => JSON.parse(request.body) as Payload)
        .filter((payload) => payload.type === type),
  };
}

/** The operational events of `type` in the outbox about the endpoint `webhookId`. */
async function outboxEvents(type: string, webhookId: string): Promise<Payload[]> {
  const rows: Array<{ payload: Payload }> = await db('outbox')
    .select('payload')
    .whereRaw(`payload->>'type' = ? AND payload->'data'->>'webhook_id' = ?`, [type, webhookId]);
  return rows.map((row) => row.payload);
}

const deliveryOf = (endpointId: string, eventType: string) => db('deliveries').where({ endpoint_id: endpointId, event_type: eventType }).first();

describe('webhook.delivery.exhausted', () => {
  it('reaches the workspace’s other endpoints, never the endpoint whose delivery was exhausted', async () => {
    const w = await workspace({ name: 'down', fails: true }, { name: 'up' });
    const eventId = (await w.publish({ run: 'exhausting' })).eventId;
    const [exhausted] = await eventually(
      async () => {
        const got = w.received('up', 'webhook.delivery.exhausted');
        return got.length > 0 ? got : undefined;
      },
      'webhook.delivery.exhausted at the healthy endpoint',
      15_000,
      50,
    );
    const delivery = await deliveryOf(w.ids.down, 'agent.completed');
    expect(delivery.status).toBe('exhausted');
    expect(exhausted.data).toMatchObject({
      webhook_id: w.ids.down,
      workspace_id: w.workspaceId,
      delivery_id: delivery.id,
      event_id: eventId,
      event_type: 'agent.completed',
    });
    expect(Date.parse(String(exhausted.data.exhausted_at))).not.toBeNaN();
    // The fan-out wrote every delivery of the event in one transaction: none went to the failing endpoint.
    expect(await deliveryOf(w.ids.down, 'webhook.delivery.exhausted')).toBeUndefined();
    expect(w.received('down', 'webhook.delivery.exhausted')).toEqual([]);
  });

  it('is not sent when a delivery of webhook.delivery.exhausted is exhausted in its turn', async () => {
    const w = await workspace(
      { name: 'first', events: ['agent.completed'], fails: true },
      { name: 'second', events: ['webhook.delivery.exhausted'], fails: true },
    );
    await w.publish({ run: 'ping-pong' });
    const notice = await eventually(
      async () => {
        const row = await deliveryOf(w.ids.second, 'webhook.delivery.exhausted');
        return row?.status === 'exhausted' ? row : undefined;
      },
      'the notice to the second endpoint exhausted',
      15_000,
      50,
    );
    expect(notice.attempt_count).toBe(2);
    expect(await outboxEvents('webhook.delivery.exhausted', w.ids.first)).toHaveLength(1);
    expect(await outboxEvents('webhook.delivery.exhausted', w.ids.second)).toEqual([]);
  });
});

describe('webhook.endpoint.recovered', () => {
  /** An endpoint failing since `minutes` ago (backdated) whose next attempt succeeds. */
  async function failThenSucceed(minutes: number) {
    const w = await workspace({ name: 'flaky', fails: true }, { name: 'watcher' });
    await w.publish({ run: 'failing' });
    await eventually(async () => (await deliveryOf(w.ids.flaky, 'agent.completed'))?.status === 'exhausted', 'the failing delivery exhausted', 15_000, 50);
    await db('endpoints')
      .where({ id: w.ids.flaky })
      .update({ failing_since: db.raw(`now() - ? * interval '1 minute'`, [minutes]) });
    const failingSince: Date = (await db('endpoints').where({ id: w.ids.flaky }).first()).failing_since;
    w.heal('flaky');
    const { eventId } = await w.publish({ run: 'healed' });
    await eventually(
      async () => (await db('deliveries').where({ endpoint_id: w.ids.flaky, event_id: eventId }).first())?.status === 'succeeded',
      'the first success',
      15_000,
      50,
    );
    expect((await db('endpoints').where({ id: w.ids.flaky }).first()).failing_since).toBeNull();
    return { w, failingSince };
  }

  it('follows the first success after failures that lasted at least an hour, to the other endpoints', async () => {
    const { w, failingSince } = await failThenSucceed(61);
    const [recovered] = await eventually(
      async () => {
        const got = w.received('watcher', 'webhook.endpoint.recovered');
        return got.length > 0 ? got : undefined;
      },
      'webhook.endpoint.recovered at the other endpoint',
      15_000,
      50,
    );
    expect(recovered.data).toMatchObject({ webhook_id: w.ids.flaky, workspace_id: w.workspaceId, url: receiver.url(`/${w.workspaceId}/flaky`) });
    expect(Date.parse(String(recovered.data.failing_since))).toBe(failingSince.getTime());
    expect(Date.parse(String(recovered.data.recovered_at)) - failingSince.getTime()).toBeGreaterThanOrEqual(3_600_000);
    expect(await deliveryOf(w.ids.flaky, 'webhook.endpoint.recovered')).toBeUndefined();
    expect(await outboxEvents('webhook.endpoint.recovered', w.ids.flaky)).toHaveLength(1);
  });

  it('is not sent after a shorter run of failures', async () => {
    const { w } = await failThenSucceed(59);
    expect(await outboxEvents('webhook.endpoint.recovered', w.ids.flaky)).toEqual([]);
  });
});
