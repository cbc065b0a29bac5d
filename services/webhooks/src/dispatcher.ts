import type { MessageShape } from '@bufbuild/protobuf';
import type { ResolveAlertWebhookResponseSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import { startPeriodic } from '@switchboard/runtime/periodic';
import type { DataKeyRing } from '@switchboard/runtime/secrets';
import type { BackgroundTask, EventsWriter, EventWriter } from '@switchboard/runtime/service';
import { withTimeout } from '@switchboard/runtime/timing';
import type { CircuitBreakers } from './circuit-breakers.js';
import { endpointSecretPurpose } from './endpoints.js';
import { Outcomes } from './outcomes.js';
import type { RetrySchedule } from './retry-schedule.js';
import type { WebhookSender } from './sender.js';
import { signatureHeaders } from './signing.js';
import { type ClaimedDelivery, claimDue, dropDelivery, releaseLease, sweepExpiredLeases } from './store/deliveries.js';

/**
 * Sends due deliveries. The rows are the queue: a claim leases due rows (SKIP LOCKED, so
 * replicas share the work), an attempt's outcome and the delivery's next state are committed
 * together, and a sweeper frees the leases of a process that died, so every delivery is attempted
 * until it succeeds or its schedule is spent (at least once; receivers deduplicate by
 * webhook-id).
 *
 * Isolation: each endpoint has at most `perEndpoint` attempts in flight in this process and its
 * own circuit breaker, and the claim never takes rows beyond that, so a receiver that hangs for
 * the whole timeout holds only its own slots. Fairness: claims go round-robin across workspaces
 * and each workspace has at most `perWorkspace` attempts in flight in this process, so one
 * workspace's many slow endpoints hold a bounded share of the process's `maxInFlight`
 * (docs/webhooks.md#fairness). Both caps count this process's attempts: the slots they protect
 * are its own.
 */

export interface DispatcherSettings {
  /** Attempts in flight per endpoint (WEBHOOK_ENDPOINT_CONCURRENCY). */
  perEndpoint: number;
  /** Attempts in flight per workspace (WEBHOOK_WORKSPACE_CONCURRENCY). */
  perWorkspace: number;
  /** Attempts in flight in this process (WEBHOOK_MAX_IN_FLIGHT). */
  maxInFlight: number;
  /** How long a claim holds a row; longer than an attempt can take (WEBHOOK_LEASE). */
  leaseMs: number;
  /** How often due rows are looked for without a wake-up (other replicas' work, retries). */
  pollMs: number;
  /** How long an endpoint may fail without a success before it is disabled (5 days). */
  disableAfterMs: number;
}

export interface DispatcherDeps {
  db: Knex;
  log: Logger;
  dataKeys: DataKeyRing;
  sender: WebhookSender;
  schedule: RetrySchedule;
  circuits: CircuitBreakers;
  recordEvent: EventWriter;
  recordEvents: EventsWriter;
  /** The alert URL and signing secret of a key, from the keys service, at send time. */
  resolveAlertTarget(keyId: string): Promise<MessageShape<typeof ResolveAlertWebhookResponseSchema>>;
  settings: DispatcherSettings;
}

/** When a key alert's target cannot be looked up (keys unreachable), the delivery waits this long. */
const unresolvedRetryMs = 5_000;
const userAgent = 'Switchboard-Webhooks/1.0';
/** Decrypted endpoint secrets kept (one per endpoint in use; a few MB at most). */
const maxCachedSecrets = 10_000;

export class Dispatcher {
  /** Attempts in flight by endpoint, and by workspace. */
  private readonly inFlight = new Map<string, number>();
  private readonly secrets = new Map<string, string>();
  private readonly inFlightByWorkspace = new Map<string, number>();
  private readonly running = new Set<Promise<void>>();
  private claiming = false;
  private again = false;
  private stopped = false;
  private wakeTimer?: NodeJS.Timeout;
  private wakeAt = Number.POSITIVE_INFINITY;

  private readonly outcomes: Outcomes;
  /** Whether the last claim may have left due rows behind for want of room in this process. */
  private mayHaveMore = true;

  constructor(private readonly deps: DispatcherDeps) {
    const { db, log, schedule, recordEvent, recordEvents, settings } = deps;
    this.outcomes = new Outcomes({
      db,
      log,
      schedule,
      recordEvent,
      recordEvents,
      disableAfterMs: settings.disableAfterMs,
      onRetryScheduled: (inMs) => {
        if (inMs < settings.pollMs) this.wakeIn(inMs);
      },
    });
  }

  /** Looks for due deliveries now (after a commit that queued some, or a freed slot). */
  wake = (): void => {
    if (this.stopped) return;
    if (this.claiming) {
      this.again = true;
      return;
    }
    this.claiming = true;
    void this.claimRounds();
  };

  start(): BackgroundTask {
    const { settings, db, log } = this.deps;
    // Polls find retries and rows other replicas queued; the sweep frees leases of attempts that died.
    const poll = startPeriodic({ name: 'delivery poll', everyMs: settings.pollMs, log, run: async () => this.wake() });
    const sweep = startPeriodic({
      name: 'lease sweep',
      everyMs: Math.max(100, Math.floor(settings.leaseMs / 2)),
      log,
      run: async () => {
        const freed = await sweepExpiredLeases(db);
        if (freed > 0) {
          log.warn({ freed }, 'freed expired delivery leases');
          this.wake();
        }
      },
    });
    this.wake();
    return {
      stop: async () => {
        this.stopped = true;
        await Promise.all([poll.stop(), sweep.stop()]);
        clearTimeout(this.wakeTimer);
        // Attempts in flight finish and record their outcome; what does not is re-sent after its lease.
        await withTimeout(Promise.all(this.running), settings.leaseMs, 'in-flight deliveries').catch((err: Error) =>
          log.warn({ err: err.message }, 'stopped with deliveries in flight'),
        );
        this.deps.sender.close();
      },
    };
  }

  private get total(): number {
    return this.running.size;
  }

  private async claimRounds(): Promise<void> {
    try {
      await this.claimWhileDue();
    } finally {
      // Synchronously with the end of the last round: a wake-up that came during it runs now.
      this.claiming = false;
      if (this.again && !this.stopped) this.wake();
    }
  }

  private async claimWhileDue(): Promise<void> {
    const { db, log, settings, circuits } = this.deps;
    do {
      this.again = false;
      const room = settings.maxInFlight - this.total;
      if (room <= 0) {
        this.mayHaveMore = true; // the next freed slot claims
        return;
      }
      const busy = new Map(this.inFlight);
      const busyWorkspaces = new Map(this.inFlightByWorkspace);
      const excluded: string[] = [];
      for (const [endpointId, allowed] of circuits.limits()) {
        if (allowed === 0) excluded.push(endpointId);
        else busy.set(endpointId, Math.max(busy.get(endpointId) ?? 0, settings.perEndpoint - allowed));
      }
      let claims: ClaimedDelivery[];
      try {
        claims = await claimDue(db, {
          limit: room,
          perEndpoint: settings.perEndpoint,
          perWorkspace: settings.perWorkspace,
          busy,
          busyWorkspaces,
          excluded,
          leaseMs: settings.leaseMs,
        });
      } catch (err) {
        log.warn({ err: (err as Error).message }, 'could not claim deliveries; retrying');
        this.wakeIn(1000);
        return;
      }
      for (const claim of claims) this.launch(claim);
      // A claim that took every slot left to some endpoint or workspace may have left due rows
      // behind: the next freed slot claims again (attempts that end while a claim runs would
      // otherwise see their cap no longer reached and wait for the poll).
      this.mayHaveMore =
        claims.length === room ||
        filled(claims, (claim) => claim.endpoint_id, busy, settings.perEndpoint) ||
        filled(claims, (claim) => claim.workspace_id, busyWorkspaces, settings.perWorkspace);
      if (claims.length === room) this.again = true;
    } while (this.again && !this.stopped);
    const probe = circuits.nextProbeAt();
    if (probe !== undefined) this.wakeIn(probe - Date.now());
  }

  /** A wake-up in `ms` (a retry due before the next poll, a circuit's probe). */
  private wakeIn(ms: number): void {
    const at = Date.now() + Math.max(0, ms);
    if (at >= this.wakeAt || this.stopped) return;
    clearTimeout(this.wakeTimer);
    this.wakeAt = at;
    this.wakeTimer = setTimeout(
      () => {
        this.wakeAt = Number.POSITIVE_INFINITY;
        this.wake();
      },
      Math.max(0, ms),
    );
  }

  private launch(claim: ClaimedDelivery): void {
    count(this.inFlight, claim.endpoint_id, 1);
    count(this.inFlightByWorkspace, claim.workspace_id, 1);
    this.deps.circuits.claimed(claim.endpoint_id);
    const attempt: Promise<void> = this.attempt(claim)
      .catch((err: Error) => this.deps.log.error({ err: err.message, delivery_id: claim.id }, 'delivery attempt failed to complete; its lease will expire'))
      .finally(() => {
        const { perEndpoint, perWorkspace } = this.deps.settings;
        // A freed slot matters only when it held due rows back (the process's room, or its
        // endpoint's or workspace's cap); new rows wake us themselves.
        const capped = (this.inFlight.get(claim.endpoint_id) ?? 0) >= perEndpoint || (this.inFlightByWorkspace.get(claim.workspace_id) ?? 0) >= perWorkspace;
        this.deps.circuits.released(claim.endpoint_id);
        this.running.delete(attempt);
        count(this.inFlight, claim.endpoint_id, -1);
        count(this.inFlightByWorkspace, claim.workspace_id, -1);
        if (capped || this.mayHaveMore) this.wake();
      });
    this.running.add(attempt);
  }

  private async attempt(claim: ClaimedDelivery): Promise<void> {
    const target = await this.target(claim);
    if (!target) return;
    const headers = { ...signatureHeaders(claim.id, claim.body, target.secrets, new Date()), 'user-agent': userAgent };
    const result = await this.deps.sender.send({ url: target.url, headers, body: claim.body, poolKey: claim.endpoint_id });
    this.deps.circuits.record(claim.endpoint_id, result.ok);
    await this.outcomes.record({ claim, url: target.url, result });
  }

  /**
   * An endpoint's signing secret, decrypted once per ciphertext rather than per attempt. A
   * rotation or a data-key rotation changes the ciphertext, so a stale entry is never used; the
   * cache is bounded and emptied when full.
   */
  private secret(encrypted: string): string {
    let secret = this.secrets.get(encrypted);
    if (secret === undefined) {
      if (this.secrets.size >= maxCachedSecrets) this.secrets.clear();
      secret = this.deps.dataKeys.decrypt(encrypted, endpointSecretPurpose);
      this.secrets.set(encrypted, secret);
    }
    return secret;
  }

  /** Where and with which secrets to send; undefined when the delivery was put back or dropped. */
  private async target(claim: ClaimedDelivery): Promise<{ url: string; secrets: string[] } | undefined> {
    const { db, log } = this.deps;
    if (claim.kind === 'webhook') {
      const secrets = [this.secret(claim.secret_encrypted!)];
      if (claim.previous_secret_encrypted && claim.previous_secret_expires_at && claim.previous_secret_expires_at.getTime() > Date.now()) {
        secrets.push(this.secret(claim.previous_secret_encrypted));
      }
      return { url: claim.url, secrets };
    }
    let resolved: MessageShape<typeof ResolveAlertWebhookResponseSchema>;
    try {
      resolved = await this.deps.resolveAlertTarget(claim.endpoint_id);
    } catch (err) {
      log.warn({ err: (err as Error).message, key_id: claim.endpoint_id }, 'could not look up a key alert target; retrying later');
      await releaseLease(db, claim.id, claim.lease_token, new Date(Date.now() + unresolvedRetryMs));
      return undefined;
    }
    if (!resolved.url || !resolved.signingSecret) {
      // Exhausted without an attempt, and without webhook.delivery.exhausted: a key alert is no workspace endpoint (outcomes.ts).
      log.info({ key_id: claim.endpoint_id, delivery_id: claim.id }, 'the key has no alert webhook any more: alert dropped');
      await dropDelivery(db, claim.id, claim.lease_token);
      return undefined;
    }
    return { url: resolved.url, secrets: [resolved.signingSecret] };
  }
}

/** Adds `delta` to the count of `key`; a count that reaches 0 is removed. */
function count(counts: Map<string, number>, key: string, delta: number): void {
  const value = (counts.get(key) ?? 0) + delta;
  if (value > 0) counts.set(key, value);
  else counts.delete(key);
}

/**
 * Whether a claim took every slot some endpoint or workspace (`keyOf`) had left beside `busy`
 * (what was in flight before the claim).
 */
function filled(claims: ClaimedDelivery[], keyOf: (claim: ClaimedDelivery) => string, busy: Map<string, number>, cap: number): boolean {
  const taken = new Map<string, number>();
  for (const claim of claims) count(taken, keyOf(claim), 1);
  for (const [key, claimed] of taken) if (claimed + (busy.get(key) ?? 0) >= cap) return true;
  return false;
}
