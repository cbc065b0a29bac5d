import { timestampMs } from '@bufbuild/protobuf/wkt';
import type { Client } from '@connectrpc/connect';
import type { KeyService, KeyState } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { hashKey, isWellFormedKey } from '@switchboard/runtime/api-key-format';
import { errorMessage, type Logger } from '@switchboard/runtime/log';
import type { RoutingPolicy } from '@switchboard/runtime/model-catalog';
import { type ModelAllowList, modelAllowList } from '@switchboard/runtime/model-patterns';
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
  /** The monthly cap as set; null without one. */
  capUsd: string | null;
  routingPolicy: RoutingPolicy;
  /** inference, read, manage: a model request needs inference (none at all refuses it: fail closed). */
  scopes: ReadonlySet<string>;
  /** Epoch ms from which the key is refused as expired, by this replica's clock; null: never. */
  expiresAt: number | null;
  /** The key's allowed models (docs/api/keys.md#allowed-models): every model without a list. */
  allows: ModelAllowList;
  rateLimits: RateLimits;
  /** Whose spend and rate limits the key counts against (its own id, or the key it was rotated from). */
  budgetId: string;
  /** The key's periodic budgets beside the month's cap (day, week, total), as set. */
  spendLimits: ReadonlyArray<{ period: string; amountUsd: string }>;
}

/** A key's rate limits (docs/api/keys.md#rate-limits); each absent when not set. */
export interface RateLimits {
  requests?: number;
  tokens?: number;
  concurrency?: number;
}

export const rateDimensions = ['requests', 'tokens', 'concurrency'] as const;
export type RateDimension = (typeof rateDimensions)[number];

/** Whether the key has a budget of its own to lease (a cap or a periodic limit): else no key lease is needed. */
export function hasKeyBudget(key: ReplicatedKey): boolean {
  return key.capUsd !== null || key.spendLimits.length > 0;
}

export function sameRateLimits(a: ReplicatedKey, b: ReplicatedKey): boolean {
  return rateDimensions.every((dimension) => a.rateLimits[dimension] === b.rateLimits[dimension]);
}

export function sameSpendLimits(a: ReplicatedKey, b: ReplicatedKey): boolean {
  const key = (limits: ReplicatedKey['spendLimits']) =>
    limits
      .map((limit) => `${limit.period}=${limit.amountUsd}`)
      .sort()
      .join(',');
  return key(a.spendLimits) === key(b.spendLimits);
}

/** The key as a request is decided on, from the keys service's state. */
export function replicatedKey(state: KeyState): ReplicatedKey {
  const limits = state.rateLimits;
  return {
    keyId: state.keyId,
    workspaceId: state.workspaceId,
    status: state.status === 'active' ? 'active' : 'revoked',
    capUsd: state.monthlySpendCapUsd ?? null,
    routingPolicy: (state.routingPolicy || 'any') as RoutingPolicy,
    scopes: new Set(state.scopes),
    expiresAt: state.expiresAt ? timestampMs(state.expiresAt) : null,
    allows: modelAllowList(state.allModels ? null : state.allowedModels),
    rateLimits: {
      ...(limits?.requestsPerMinute !== undefined ? { requests: limits.requestsPerMinute } : {}),
      ...(limits?.tokensPerMinute !== undefined ? { tokens: limits.tokensPerMinute } : {}),
      ...(limits?.maxConcurrent !== undefined ? { concurrency: limits.maxConcurrent } : {}),
    },
    budgetId: state.budgetId || state.keyId,
    spendLimits: state.spendLimits.filter((limit) => limit.period !== 'month').map((limit) => ({ period: limit.period, amountUsd: limit.amountUsd })),
  };
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
        const after = replicatedKey(state);
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
