import { randomBytes } from 'node:crypto';
import { type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { readKeysConfig } from '@switchboard/keys/config';
import { startEventConsumers } from '@switchboard/keys/events';
import { prepareKeys } from '@switchboard/keys/prepare';
import { Revocations } from '@switchboard/keys/revocations';
import { registerRoutes } from '@switchboard/keys/server';
import { Spend } from '@switchboard/keys/spend';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService } from '@switchboard/runtime/in-process';
import { Money } from '@switchboard/runtime/money';
import { connectNats, ensureEventStream, type NatsConnection } from '@switchboard/runtime/nats';
import { buildEventPayload } from '@switchboard/runtime/outbox';
import type { BackgroundTask } from '@switchboard/runtime/service';
import { eventually, requireEnv } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The keys service's usage consumer on the real stream: billing's `billing.usage.recorded`
 * events, published as billing's outbox relay would, are applied a batch per transaction,
 * each event once whatever the redeliveries, settling the cap leases they name.
 */

const name = `keys_usage_${randomBytes(3).toString('hex')}`;
let service: InProcessService;
let handlers: ReturnType<typeof prepareKeys>;
let nc: NatsConnection;
let jsm: JetStreamManager;
let consumers: BackgroundTask[] = [];
let subjectPrefix: string;
const stream = requireEnv('EVENTS_STREAM');

beforeAll(async () => {
  service = await inProcessService('keys', new URL('../dist/migrations/', import.meta.url));
  handlers = prepareKeys(service.runtime, readKeysConfig({}));
  nc = await connectNats(requireEnv('NATS_URL'), name, service.runtime.log);
  await ensureEventStream(nc, stream, requireEnv('EVENTS_SUBJECT_PREFIX'));
  jsm = await jetstreamManager(nc);
  subjectPrefix = `${requireEnv('EVENTS_SUBJECT_PREFIX')}.${name}`;
  const { db, log, recordEvent } = service.runtime;
  consumers = startEventConsumers(
    { name, db, nats: nc, log, config: { eventsStream: stream, eventsSubjectPrefix: subjectPrefix } },
    { spend: new Spend({ log, recordEvent, notifier: handlers.notifier }), revocations: new Revocations({ log, recordEvent, notifier: handlers.notifier }) },
  );
});

afterAll(async () => {
  await Promise.all(consumers.map((consumer) => consumer.stop()));
  for await (const info of jsm?.consumers.list(stream) ?? []) {
    if (info.name.startsWith(name)) await jsm.consumers.delete(stream, info.name);
  }
  await nc?.close();
  await handlers?.states.stop();
  await service?.stop();
});

describe('the usage consumer', () => {
  it('applies a burst of usage exactly once, redeliveries included, settling the cap lease it names', async () => {
    const workspaceId = newId('org');
    const developer = { caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role: 'developer' };
    const clientAs = service.serve((router) => registerRoutes(router, handlers));
    const { key } = await clientAs(KeyService, developer).createKey({ name: 'busy', monthlySpendCapUsd: '10' });
    const keyId = key!.keyId;
    const lease = await handlers.capLeases.lease({ keyId, leaseId: '', holder: 'replica-1', usedUsd: '0', wantUsd: '5', minUsd: '5' });

    const js = jetstream(nc);
    const events = Array.from({ length: 40 }, (_, i) => {
      const eventId = newId('evt');
      const data = {
        key_id: keyId,
        workspace_id: workspaceId,
        cost_usd: '0.05',
        occurred_at: new Date().toISOString(),
        balance_usd: '10',
        ...(i % 2 ? { cap_lease_id: lease.leaseId } : {}),
      };
      return { eventId, body: JSON.stringify(buildEventPayload(eventId, { type: 'billing.usage.recorded', workspaceId, data }, 'billing')) };
    });
    const subject = `${subjectPrefix}.billing.usage.recorded`;
    await Promise.all(events.map((event) => js.publish(subject, event.body, { msgID: event.eventId })));
    // The same events again under other message ids: a relay that published them twice.
    await Promise.all(events.slice(0, 10).map((event) => js.publish(subject, event.body, { msgID: `${event.eventId}-again` })));

    const durable = `${name}-billing-usage-recorded`;
    await eventually(async () => {
      const info = await jsm.consumers.info(stream, durable);
      return info.num_pending === 0 && info.num_ack_pending === 0 && info.delivered.consumer_seq >= 50;
    }, 'every message acked');
    const { db } = service.runtime;
    const spend = await db('key_monthly_spend').where({ key_id: keyId }).first(db.raw('spend_usd::text AS spend'), 'usage_count');
    expect(new Money(spend.spend).eq('2')).toBe(true);
    expect(Number(spend.usage_count)).toBe(40);
    const settled = await db('cap_leases').where({ id: lease.leaseId }).first(db.raw('settled_usd::text AS settled'));
    expect(new Money(settled.settled).eq('1')).toBe(true);
  });
});
