import { timestampDate } from '@bufbuild/protobuf/wkt';
import type { Client } from '@connectrpc/connect';
import { KeyRevokedSchema, KeyUpdatedSchema, SessionRevokedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { AuthService } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { decodeEvent, parseEventEnvelope } from '@switchboard/runtime/consumer';
import { eventTypeOf } from '@switchboard/runtime/event-data';
import type { Logger } from '@switchboard/runtime/log';
import { connectNats, type NatsAccess, type NatsConnection } from '@switchboard/runtime/nats';
import { startPeriodic } from '@switchboard/runtime/periodic';

/**
 * The sessions whose access tokens the gateway refuses before they expire (docs/api/identity.md#revocation: logout,
 * password change or reset, deactivation take effect on the next request). No database call
 * per request: the set lives in memory and is kept fresh by
 *  - the `sb-revoked-sessions` header of identity's answers, for the replica that proxied the
 *    revoking call (effective on its very next request);
 *  - a core NATS subscription on the `session.revoked` subject (the outbox relay publishes on
 *    commit: typically a few milliseconds, well under a second);
 *  - a full reload from identity (ListRevokedSessions) at start-up, after every NATS reconnect,
 *    and every REVOCATION_POLL_INTERVAL (10 s) as a safety net while NATS is unreachable.
 * Entries are dropped once every access token of the session has expired (15 minutes + slack),
 * so the set stays bounded by the revocations of the last quarter hour.
 */

export const accessTokenLifetimeMs = 15 * 60 * 1000;
const slackMs = 60_000;

export class RevokedSessions {
  private readonly forgetAt = new Map<string, number>();
  private lastPrune = 0;

  constructor(private readonly now: () => number = Date.now) {}

  add(sessionIds: Iterable<string>, revokedAt = this.now()): void {
    const until = revokedAt + accessTokenLifetimeMs + slackMs;
    for (const id of sessionIds) {
      if (id && (this.forgetAt.get(id) ?? 0) < until) this.forgetAt.set(id, until);
    }
    this.prune();
  }

  has(sessionId: string): boolean {
    const until = this.forgetAt.get(sessionId);
    return until !== undefined && until > this.now();
  }

  get size(): number {
    return this.forgetAt.size;
  }

  private prune(): void {
    const now = this.now();
    if (now - this.lastPrune < 10_000) return;
    this.lastPrune = now;
    for (const [id, until] of this.forgetAt) if (until <= now) this.forgetAt.delete(id);
  }
}

export interface RevocationFeedOptions {
  revoked: RevokedSessions;
  identity: Client<typeof AuthService>;
  natsUrl: string;
  /** How the feed's connection authenticates (the gateway's NATS user). */
  natsAccess: NatsAccess;
  subjectPrefix: string;
  log: Logger;
  pollIntervalMs: number;
  /** Called with an organization whose memberships or roles changed (organization.* events). */
  onWorkspaceChanged(workspaceId: string): void;
  /** Called with an API key whose standing changed (key.revoked, key.updated events). */
  onKeyChanged(keyId: string): void;
}

/** Starts the feed; resolves after the first load (or a failed first attempt: it keeps retrying). */
export async function startRevocationFeed(options: RevocationFeedOptions): Promise<{ stop(): Promise<void> }> {
  const { revoked, identity, log } = options;
  let stopped = false;
  const load = async () => {
    try {
      const { sessions } = await identity.listRevokedSessions({}, { timeoutMs: 5000 });
      for (const session of sessions) revoked.add([session.sessionId], session.revokedAt ? timestampDate(session.revokedAt).getTime() : Date.now());
      return true;
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'could not load revoked sessions from identity; retrying');
      return false;
    }
  };

  let nc: NatsConnection | undefined;
  const natsReady = connectNats(options.natsUrl, 'gateway', log, options.natsAccess).then((connection) => {
    if (stopped) return connection.close().then(() => undefined);
    nc = connection;
    connection.subscribe(`${options.subjectPrefix}.${eventTypeOf(SessionRevokedSchema)}`, {
      callback: (err, msg) => {
        if (err) return;
        try {
          const event = decodeEvent(SessionRevokedSchema, parseEventEnvelope(msg.data));
          revoked.add(event.data.sessionIds, event.occurred_at ? Date.parse(event.occurred_at) : Date.now());
        } catch (parseError) {
          log.warn({ err: (parseError as Error).message }, 'ignored a malformed session.revoked event');
        }
      },
    });
    // Removals, role changes, transfers and deletions: cached roles of that organization go.
    connection.subscribe(`${options.subjectPrefix}.organization.>`, {
      callback: (err, msg) => {
        if (err) return;
        try {
          const event = parseEventEnvelope(msg.data);
          if (event.workspace_id) options.onWorkspaceChanged(event.workspace_id);
        } catch (parseError) {
          log.warn({ err: (parseError as Error).message }, 'ignored a malformed organization event');
        }
      },
    });
    // Revoked keys, changed or reached caps: the cached answer for that key goes.
    for (const schema of [KeyRevokedSchema, KeyUpdatedSchema]) {
      const type = eventTypeOf(schema);
      connection.subscribe(`${options.subjectPrefix}.${type}`, {
        callback: (err, msg) => {
          if (err) return;
          try {
            const { keyId } = decodeEvent(schema, parseEventEnvelope(msg.data)).data;
            if (keyId) options.onKeyChanged(keyId);
          } catch (parseError) {
            log.warn({ err: (parseError as Error).message }, `ignored a malformed ${type} event`);
          }
        },
      });
    }
    void (async () => {
      for await (const status of connection.status()) {
        // Events published while disconnected were missed: reload the authoritative list.
        if (status.type === 'reconnect') void load();
      }
    })();
    // Events committed between the first load and the subscription are covered by this reload.
    void load();
  });
  natsReady.catch((err) => log.warn({ err: (err as Error).message }, 'NATS unavailable: revocations come from polling identity'));

  // The safety net while NATS is unreachable; load() logs its own failures, so a run never fails.
  const poll = startPeriodic({
    name: 'revoked sessions reload',
    everyMs: options.pollIntervalMs,
    log,
    run: async () => {
      await load();
    },
  });
  await load();
  return {
    async stop() {
      stopped = true;
      await poll.stop();
      await nc?.close().catch(() => undefined);
    },
  };
}
