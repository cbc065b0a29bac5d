import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../src/audit.js';
import { AuditPublisher } from '../src/audit-publisher.js';
import { type EventEnvelopeJson, parseEventEnvelope } from '../src/consumer.js';
import { createLogger } from '../src/log.js';
import { connectNats, ensureEventStream, type NatsConnection } from '../src/nats.js';
import { requireEnv } from '../src/testing.js';

/**
 * The gateway's audit records (docs/api/audit.md): published to the event stream as an outbox
 * relay would publish them, without a request ever waiting, dropped and counted when the queue is full.
 */

const log = createLogger('audit-publisher-test', 'silent');
let nc: NatsConnection;

const record = (n: number): AuditRecord => ({
  action: 'access.denied',
  outcome: 'denied',
  actor: { type: 'api_key', id: `key_${n}`, ip: '203.0.113.9' },
  target: { type: 'route', id: 'GET /v1/keys' },
  workspaceId: 'org_audit',
  requestId: `req_audit${n}`,
  subjectUserId: 'usr_audit',
  metadata: { reason: 'insufficient_scope', required_scope: 'read' },
});

beforeAll(async () => {
  nc = await connectNats(requireEnv('NATS_URL'), 'audit-publisher-test', log);
  await ensureEventStream(nc, requireEnv('EVENTS_STREAM'), requireEnv('EVENTS_SUBJECT_PREFIX'));
});

afterAll(async () => {
  await nc?.close();
});

describe('AuditPublisher', () => {
  it('publishes audit.recorded in the outbox envelope, Nats-Msg-Id = event id', async () => {
    const prefix = requireEnv('EVENTS_SUBJECT_PREFIX');
    const seen: Array<{ envelope: EventEnvelopeJson; msgId: string | undefined }> = [];
    nc.subscribe(`${prefix}.audit.recorded`, {
      callback: (err, msg) => {
        if (!err) seen.push({ envelope: parseEventEnvelope(msg.data), msgId: msg.headers?.get('Nats-Msg-Id') });
      },
    });
    await nc.flush();
    const publisher = new AuditPublisher({ nats: nc, subjectPrefix: prefix, producer: 'gateway', log });
    publisher.publish(record(1));
    await expect.poll(() => seen.length).toBe(1);
    const [{ envelope, msgId }] = seen;
    expect(msgId).toBe(envelope.event_id);
    expect(envelope).toMatchObject({ type: 'audit.recorded', workspace_id: 'org_audit', producer: 'gateway', request_id: 'req_audit1' });
    expect(envelope.data).toMatchObject({
      action: 'access.denied',
      actor_type: 'api_key',
      actor_id: 'key_1',
      actor_ip: '203.0.113.9',
      target_type: 'route',
      target_id: 'GET /v1/keys',
      outcome: 'denied',
      subject_user_id: 'usr_audit',
      metadata: { reason: 'insufficient_scope', required_scope: 'read' },
    });
    await publisher.stop();
  });

  it('never waits for NATS: a full queue drops and counts, and stop gives up at its deadline', async () => {
    const publisher = new AuditPublisher({ nats: new Promise<NatsConnection>(() => {}), subjectPrefix: 'nowhere', producer: 'gateway', log, maxQueued: 2 });
    const started = performance.now();
    for (let n = 0; n < 5; n++) publisher.publish(record(n));
    expect(performance.now() - started).toBeLessThan(100);
    expect(publisher.queued).toBe(2);
    expect(publisher.dropped).toBe(3);
    await publisher.stop(50);
    // Stopped: nothing more is queued.
    publisher.publish(record(9));
    expect(publisher.queued).toBe(2);
  });
});
