import { EventService, WebhookService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService } from '@switchboard/runtime/in-process';
import { readWebhooksConfig } from '@switchboard/webhooks/config';
import { prepareWebhooks } from '@switchboard/webhooks/prepare';
import { registerRoutes } from '@switchboard/webhooks/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * PublishEvent's group commit (docs/webhooks.md#deliveries-retries-and-their-schedule): calls
 * that arrive together share one transaction, and a batch keeps each call's promise: one event
 * per idempotency key (within the batch and across batches), one outbox row and one delivery per
 * subscribed endpoint for each event, nothing for a retry.
 */

let service: InProcessService;
let clientAs: ReturnType<InProcessService['serve']>;

beforeAll(async () => {
  service = await inProcessService('webhooks', new URL('../dist/migrations/', import.meta.url));
  const handlers = prepareWebhooks(service.runtime, readWebhooksConfig({}));
  clientAs = service.serve((router) => registerRoutes(router, handlers));
});

afterAll(() => service?.stop());

describe('PublishEvent in batches', () => {
  it('writes each event once, keeps retries out, and fans every event out to each subscribed endpoint', async () => {
    const workspaceId = newId('org');
    const admin = { caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role: 'admin' };
    const webhooks = clientAs(WebhookService, admin);
    const subscribed = await webhooks.createWebhook({ workspaceId, url: 'https://a.example.com/hooks', events: ['agent.completed'] });
    const everything = await webhooks.createWebhook({ workspaceId, url: 'https://b.example.com/hooks' });
    await webhooks.createWebhook({ workspaceId, url: 'https://c.example.com/hooks', events: ['key.created'] });
    const events = clientAs(EventService, { caller: 'data-plane' });
    const publish = (seq: number, idempotencyKey?: string) => events.publishEvent({ workspaceId, type: 'agent.completed', data: { seq }, idempotencyKey });

    const first = await publish(0, 'run-0');
    // Issued together, so they share batches: two keyed calls with one key, a retry of an
    // earlier key, and plain events.
    const answers = await Promise.all([
      publish(1, 'run-1'),
      publish(2, 'run-1'),
      publish(3, 'run-0'),
      ...Array.from({ length: 40 }, (_, i) => publish(10 + i)),
    ]);
    const ids = answers.map((answer) => answer.eventId);
    expect(ids[0]).toMatch(/^evt_/);
    expect(ids[1]).toBe(ids[0]);
    expect(ids[2]).toBe(first.eventId);
    expect(new Set(ids.slice(3)).size).toBe(40);

    const db = service.runtime.db;
    const distinct = [first.eventId, ids[0], ...ids.slice(3)];
    // Every agent.completed of the workspace in the outbox: a retry that wrote its own would show.
    const outbox = await db('outbox').whereRaw("payload->>'workspace_id' = ? AND payload->>'type' = 'agent.completed'", [workspaceId]).pluck('event_id');
    expect(outbox.toSorted()).toEqual(distinct.toSorted());
    const deliveries = await db('deliveries').whereIn('event_id', distinct).select('endpoint_id', 'event_id');
    expect(deliveries).toHaveLength(distinct.length * 2);
    for (const endpoint of [subscribed, everything]) {
      expect(new Set(deliveries.filter((row) => row.endpoint_id === endpoint.webhookId).map((row) => row.event_id))).toEqual(new Set(distinct));
    }
    const bodies = await db('events').where({ workspace_id: workspaceId }).select('id', 'body');
    expect(bodies).toHaveLength(distinct.length);
    const seqOf = new Map(bodies.map((row) => [row.id, (JSON.parse(row.body) as { data: { seq: number } }).data.seq]));
    expect(seqOf.get(ids[0])).toBe(1);
    expect(seqOf.get(ids[3])).toBe(10);
  });
});
