import { jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { AuthorizationError, type ConnectionOptions, connect, type NatsConnection, nkeyAuthenticator, nkeys } from '@nats-io/transport-node';
import { natsInboxPrefix } from '@switchboard/contracts/nats-permissions';
import type { Logger } from './log.js';

export type { NatsConnection };

/** How a process authenticates to NATS (docs/operations.md#nats-credentials). */
export interface NatsAccess {
  /** NATS_NKEY_SEED: the NKey user seed of the component's NATS user; none on an open NATS (`npm start`). */
  seed?: string;
  /** Told when the server refuses the credentials (true) and when it accepts them again (false): readiness follows it. */
  onRefused?(refused: boolean): void;
}

/** The NATS users of this process whose refusal was logged and not yet followed by an acceptance. */
const refusalsReported = new Set<string>();

/** How long a first connection waits before trying again. */
const firstConnectRetryMs = 250;

/**
 * Connects to NATS and keeps reconnecting forever: a NATS outage delays events (the outbox
 * holds them), it never stops a service. Replies come on the component's own inbox prefix, so its
 * NATS user may subscribe to its replies and no one else's. Refused credentials do not stop it
 * either: it logs one line naming NATS_NKEY_SEED and the user's public key, tells `onRefused`
 * (the process turns unready) and keeps trying, so a server whose configuration is fixed is
 * joined without a restart.
 */
export async function connectNats(url: string, name: string, log: Logger, access: NatsAccess = {}): Promise<NatsConnection> {
  const user = access.seed === undefined ? undefined : nkeys.fromSeed(new TextEncoder().encode(access.seed)).getPublicKey();
  let refused = false;
  const setRefused = (now: boolean) => {
    if (now === refused) return;
    refused = now;
    access.onRefused?.(now);
    // One line per process, however many connections it holds (the gateway has two).
    const reported = refusalsReported.has(user ?? '');
    if (now) refusalsReported.add(user ?? '');
    else refusalsReported.delete(user ?? '');
    if (now && !reported)
      log.error(
        { nats_user: user ?? null },
        user
          ? `NATS refused the credentials of NATS_NKEY_SEED (user ${user}): add that public key to the NATS server's authorization or set the component's own seed (docs/operations.md#nats-credentials)`
          : 'NATS asks for credentials and NATS_NKEY_SEED is not set (docs/operations.md#nats-credentials)',
      );
  };
  const options: ConnectionOptions = {
    servers: url,
    name,
    inboxPrefix: natsInboxPrefix(name),
    authenticator: access.seed === undefined ? undefined : nkeyAuthenticator(new TextEncoder().encode(access.seed)),
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    // The first connection is retried here, so that a refusal is seen (nats.js would retry it silently).
    waitOnFirstConnect: false,
    // Refused credentials on a reconnect are retried too: the server's configuration may be fixed.
    ignoreAuthErrorAbort: true,
    timeout: 2000,
  };
  let nc: NatsConnection | undefined;
  while (nc === undefined) {
    try {
      nc = await connect(options);
    } catch (err) {
      if (err instanceof AuthorizationError) setRefused(true);
      await new Promise((resolve) => setTimeout(resolve, firstConnectRetryMs));
    }
  }
  setRefused(false);
  const connection = nc;
  void (async () => {
    for await (const status of connection.status()) {
      if (status.type === 'disconnect' || status.type === 'reconnect') log.warn({ nats: status.type }, 'nats connection');
      if (status.type === 'error' && status.error instanceof AuthorizationError) setRefused(true);
      if (status.type === 'reconnect') setRefused(false);
    }
  })();
  return connection;
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
