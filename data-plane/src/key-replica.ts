import type { Client } from '@connectrpc/connect';
import type { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { hashKey, isWellFormedKey } from '@switchboard/runtime/api-key-format';
import { errorMessage, type Logger } from '@switchboard/runtime/log';
import type { RoutingPolicy } from '@switchboard/runtime/model-catalog';
import { startPeriodic } from '@switchboard/runtime/periodic';

/**
 * The key states of the keys service, in memory (docs/money-path.md#replicas): a request is
 * decided on them with no call. They follow the keys service by version: every `refreshMs`
 * (250 ms) the replica asks for what changed since the version it holds, and a key event on NATS
 * asks at once, so a revocation reaches it within milliseconds, and within the poll period when
 * NATS is down (the 1-second bound of docs/api/keys.md#revocation holds either way).
 *
 * A key the replica does not know yet (created a moment ago) costs one more poll, shared by every
 * request waiting at that moment (single flight): a flood of unknown keys costs the keys service
 * one ListKeyStates per round trip, never one per request. A key that is not well formed is
 * unknown without any of this.
 *
 * When the keys service cannot be reached for `maxStaleMs`, the replica no longer vouches for its
 * states (a revocation could have been missed) and requests are refused with 503 until it can.
 */

export interface ReplicatedKey {
  keyId: string;
  workspaceId: string;
  status: 'active' | 'revoked';
  /** The monthly cap as set; null without one (no cap lease is needed). */
  capUsd: string | null;
  routingPolicy: RoutingPolicy;
}

export interface KeyReplicaDeps {
  log: Logger;
  keys: Client<typeof KeyService>;
  refreshMs: number;
  maxStaleMs: number;
  timeoutMs?: number;
  /** A key the replica held changed (its cap, its status…): leases decided under the old state are let go. */
  onChange?: (before: ReplicatedKey, after: ReplicatedKey) => void;
}

const pageSize = 5000;
/** The least time between two polls asked for by requests (an unknown key, a nudge). */
const minGapMs = 20;

export class KeyReplica {
  private readonly byHash = new Map<string, ReplicatedKey>();
  private version = 0n;
  private syncedAt = 0;
  private lastStartedAt = 0;
  /** The poll under way, and whether another must follow it (a caller arrived after it started). */
  private running?: Promise<void>;
  private next?: Promise<void>;
  private poller?: { stop(): Promise<void> };

  constructor(private readonly deps: KeyReplicaDeps) {}

  /** Loads every key state (retrying until it can), then follows the changes in the background. */
  async start(signal?: AbortSignal): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.sync();
        break;
      } catch (err) {
        if (signal?.aborted) throw err;
        this.deps.log.warn({ err: errorMessage(err), attempt }, 'could not load the key states yet; retrying');
        await new Promise((resolve) => setTimeout(resolve, Math.min(200 * attempt, 2000)));
      }
    }
    this.deps.log.info({ keys: this.byHash.size, version: this.version.toString() }, 'key states loaded');
    this.poller = startPeriodic({
      name: 'key-states',
      everyMs: this.deps.refreshMs,
      log: this.deps.log,
      run: () => this.sync(),
    });
  }

  async stop(): Promise<void> {
    await this.poller?.stop();
  }

  /** Whether the states are recent enough to decide on (see maxStaleMs). */
  get fresh(): boolean {
    return Date.now() - this.syncedAt < this.deps.maxStaleMs;
  }

  get size(): number {
    return this.byHash.size;
  }

  /** The key, or undefined when no such key exists (after one more poll for a key not seen yet). */
  async lookup(fullKey: string): Promise<ReplicatedKey | undefined> {
    if (!isWellFormedKey(fullKey)) return undefined;
    const hash = hashKey(fullKey);
    const known = this.byHash.get(hash);
    if (known) return known;
    await this.syncSoon();
    return this.byHash.get(hash);
  }

  /** Something changed (a key event): poll now rather than at the next period. */
  nudge(): void {
    this.syncSoon().catch((err) => this.deps.log.warn({ err: errorMessage(err) }, 'key states poll failed'));
  }

  /**
   * A poll that starts after this call (a change committed before it is seen), shared by every
   * caller meanwhile. Polls asked for this way start at least `minGapMs` apart, so keys nobody
   * issued (well formed, checksum and all) cost the keys service a bounded rate of polls.
   */
  private syncSoon(): Promise<void> {
    this.next ??= (this.running ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => new Promise((resolve) => setTimeout(resolve, Math.max(0, this.lastStartedAt + minGapMs - Date.now()))))
      .then(() => {
        this.next = undefined;
        return this.sync();
      });
    return this.next;
  }

  private sync(): Promise<void> {
    if (this.running) return this.running;
    this.lastStartedAt = Date.now();
    this.running = this.pull().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async pull(): Promise<void> {
    const startedAt = Date.now();
    for (;;) {
      const page = await this.deps.keys.listKeyStates({ afterVersion: this.version, limit: pageSize }, { timeoutMs: this.deps.timeoutMs ?? 5000 });
      for (const state of page.states) {
        const after: ReplicatedKey = {
          keyId: state.keyId,
          workspaceId: state.workspaceId,
          status: state.status === 'active' ? 'active' : 'revoked',
          capUsd: state.monthlySpendCapUsd ?? null,
          routingPolicy: (state.routingPolicy || 'any') as RoutingPolicy,
        };
        const before = this.byHash.get(state.keyHash);
        this.byHash.set(state.keyHash, after);
        if (before) this.deps.onChange?.(before, after);
      }
      if (page.version > this.version) this.version = page.version;
      if (!page.hasMore) break;
    }
    this.syncedAt = startedAt;
  }
}
