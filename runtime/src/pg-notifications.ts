import pg from 'pg';
import { afterCommit, type Knex } from './db.js';
import type { Logger } from './log.js';
import { sleepUnless, withTimeout } from './timing.js';

/**
 * Postgres notifications: a LISTEN on one channel, and a notifier that sends after commit.
 *
 * A LISTEN on one Postgres channel over a dedicated connection (a pooled one would drop it),
 * re-established with a capped back-off after any loss. NOTIFY is transactional, so a listener
 * hears only committed changes; what was sent while it was not listening is lost, which is why
 * `onListening` runs after every (re)connect: the caller resynchronizes there.
 */

export interface PgListenerOptions {
  db: Knex;
  channel: string;
  log: Logger;
  onNotification(payload: string): void;
  /** After each successful LISTEN (the first one and every reconnect). */
  onListening?(): void;
  /** When the connection is lost (until onListening runs again, nothing is heard). */
  onLost?(): void;
  /** Cap of the reconnect back-off (default 2000 ms). */
  maxBackoffMs?: number;
}

export interface PgListener {
  /** Whether the channel is being listened to right now. */
  readonly listening: boolean;
  stop(): Promise<void>;
}

/** The pg connection settings behind a knex instance, for a dedicated connection. */
function connectionConfig(db: Knex): pg.ClientConfig | undefined {
  const connection = (db.client as { config?: Knex.Config }).config?.connection;
  if (typeof connection === 'string') return { connectionString: connection };
  if (connection && typeof connection === 'object') return { ...(connection as pg.ClientConfig) };
  return undefined;
}

const errorMessage = (err: unknown) => (err instanceof Error ? `${err.name}: ${err.message}` : String(err)).slice(0, 1000);

export function startPgListener(options: PgListenerOptions): PgListener {
  const { channel, log } = options;
  const maxBackoffMs = options.maxBackoffMs ?? 2000;
  const config = connectionConfig(options.db);
  let stopped = false;
  let listening = false;
  let resolveStopped!: () => void;
  const stoppedPromise = new Promise<void>((resolve) => (resolveStopped = resolve));

  const loop = async () => {
    if (!config) {
      log.warn({ channel }, 'no connection settings for LISTEN');
      return;
    }
    let failures = 0;
    while (!stopped) {
      const client = new pg.Client({ ...config, keepAlive: true, connectionTimeoutMillis: 3000 });
      const lost = new Promise<void>((resolve) => {
        client.on('error', (err) => {
          if (!stopped) log.warn({ err: errorMessage(err), channel }, 'listen connection error');
          resolve();
        });
        client.on('end', () => resolve());
      });
      client.on('notification', (message) => {
        if (message.channel === channel) options.onNotification(message.payload ?? '');
      });
      try {
        await withTimeout(client.connect(), 5000, 'listen connect');
        await withTimeout(client.query(`LISTEN "${channel.replace(/"/g, '""')}"`), 5000, 'LISTEN');
        failures = 0;
        listening = true;
        options.onListening?.();
        await Promise.race([lost, stoppedPromise]);
      } catch (err) {
        if (!stopped) log.warn({ err: errorMessage(err), channel }, 'listen failed');
      }
      if (listening) {
        listening = false;
        // Stopping ends the connection on purpose: nothing is lost that anyone still waits for.
        if (!stopped) options.onLost?.();
      }
      await withTimeout(client.end(), 2000, 'listen end').catch(() => undefined);
      if (stopped) break;
      failures++;
      await sleepUnless(Math.min(100 * 2 ** failures, maxBackoffMs), stoppedPromise);
    }
  };
  const running = loop();

  return {
    get listening() {
      return listening;
    },
    async stop() {
      stopped = true;
      resolveStopped();
      await withTimeout(running, 5000, 'listener stop').catch(() => undefined);
    },
  };
}

/**
 * Sends NOTIFYs on one channel once the transactions that caused them have committed, coalesced
 * per tick into one statement of its own. Not inside the data transaction: Postgres serializes
 * the commits of notifying transactions, disk flush included, which would cap every writer at a
 * few hundred commits a second. The notifying statement commits without waiting for the flush
 * (`synchronous_commit` off for it alone): it carries no data, only the signal.
 */
export class PgNotifier {
  private pending = new Set<string>();
  private scheduled = false;

  constructor(
    private readonly deps: {
      db: Knex;
      channel: string;
      log: Logger;
      /** Runs synchronously on commit with the payloads, for this process's own listener (it hears the NOTIFY later). */
      onCommit?(payloads: string[]): void;
    },
  ) {}

  /** Notifies each payload after `trx` commits (nothing after a rollback). */
  afterCommit(trx: Knex.Transaction, payloads: string[]): void {
    if (payloads.length === 0) return;
    afterCommit(trx, () => {
      this.deps.onCommit?.(payloads);
      this.send(payloads);
    });
  }

  send(payloads: string[]): void {
    for (const payload of payloads) this.pending.add(payload);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => void this.flush());
  }

  private async flush(): Promise<void> {
    const batch = [...this.pending];
    this.pending = new Set();
    this.scheduled = false;
    try {
      await this.deps.db.raw(`SELECT set_config('synchronous_commit', 'off', true), pg_notify(?, payload) FROM unnest(?::text[]) AS payload`, [
        this.deps.channel,
        batch,
      ]);
    } catch (err) {
      // Listeners also bound how long they trust what they cached (their maximum age).
      this.deps.log.warn({ err: errorMessage(err), channel: this.deps.channel, count: batch.length }, 'could not send notifications');
    }
  }
}
