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
export async function ensureEventStream(nc: NatsConnection, stream: string, subjectPrefix: string): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const config = {
    name: stream,
    subjects: [`${subjectPrefix}.>`],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    max_age: 7 * 24 * 3600 * 1e9,
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
