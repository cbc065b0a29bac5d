import { jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from './log.js';

export type { NatsConnection };

/**
 * Connects to NATS and keeps reconnecting forever: a NATS outage delays events (the outbox
 * holds them), it never stops a service.
 */
export async function connectNats(url: string, name: string, log: Logger): Promise<NatsConnection> {
  const nc = await connect({
    servers: url,
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    waitOnFirstConnect: true,
    timeout: 2000,
  });
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect' || status.type === 'reconnect') log.warn({ nats: status.type }, 'nats connection');
    }
  })();
  return nc;
}

/** Creates the event stream if missing (idempotent; every service may call it). */
export function ensureEventStream(nc: NatsConnection, stream: string, subjectPrefix: string): Promise<void> {
  return ensureStream(nc, stream, [`${subjectPrefix}.>`]);
}

/**
 * The work stream (docs/money-path.md#usage): usage records and conversation exchanges from the
 * data planes, each a subject under the work prefix.
 */
export function workSubjects(prefix: string): { usage: string; exchanges: string } {
  return { usage: `${prefix}.usage.recorded.v1`, exchanges: `${prefix}.conversations.exchanges.v1` };
}

/** Creates the work stream if missing (idempotent; the data plane and its consumers call it). */
export function ensureWorkStream(nc: NatsConnection, stream: string, prefix: string): Promise<void> {
  const subjects = workSubjects(prefix);
  return ensureStream(nc, stream, [subjects.usage, subjects.exchanges]);
}

async function ensureStream(nc: NatsConnection, stream: string, subjects: string[]): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const config = {
    name: stream,
    subjects,
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    max_age: 7 * 24 * 3600 * 1e9,
    // Publishers set Nats-Msg-Id (an event id, a generation id): a retried publish within this
    // window is stored once.
    duplicate_window: 120 * 1e9,
  };
  try {
    await jsm.streams.info(stream);
  } catch {
    try {
      await jsm.streams.add(config);
    } catch (err) {
      // Another service created it in the meantime.
      await jsm.streams.info(stream).catch(() => Promise.reject(err));
    }
  }
}
