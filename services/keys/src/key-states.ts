import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import { Money } from '@switchboard/runtime/money';
import { startPgListener } from '@switchboard/runtime/pg-notifications';
import { monthOf } from './months.js';
import { findBalance } from './store/balances.js';
import { findKeyStateByHash, findKeyStateById, type KeyStateRow, keyStateChannel } from './store/keys.js';

/**
 * The standing of keys and workspace balances in memory, so AuthorizeKey and AuthenticateKey
 * answer without a database round trip (docs/api/keys.md#authorization-for-the-data-plane: well under a millisecond when warm).
 *
 * Freshness: every change of a key's standing (revocation, cap, spend, balance) is followed, once
 * committed, by a NOTIFY on `keys_state_changed` (PgNotifier), and every replica LISTENs to it: an
 * entry is reloaded on the notification, milliseconds after the commit, on every replica,
 * whichever replica made the change; the replica that made it applies it synchronously on commit
 * (`invalidate`), before its answer leaves. A notification can still be lost (a crash between
 * commit and NOTIFY, a half-open listen connection), so no entry is trusted for more than
 * `maxAgeMs` (1 s: the bound of docs/api/keys.md#revocation on a revocation), and a reconnect drops the whole cache.
 * A reload costs one indexed query per key and second at most, paid by the request that finds
 * its entry expired.
 * A load that overlaps a notification of the same key is not cached (it may have read the row
 * before the commit it was told about). Unknown keys are cached too: a key cannot become known
 * once looked up, since its hash exists only after it is created (256 random bits).
 */

export interface KeyState {
  keyId: string;
  keyHash: string;
  workspaceId: string;
  createdBy: string;
  status: 'active' | 'revoked';
  /** The cap as stored ("0.10"), null without one. */
  capUsd: string | null;
  routingPolicy: string;
  /** `YYYY-MM-01`: the month `spendUsd` is of. */
  month: string;
  spendUsd: string;
  /** spend ≥ cap: blocked until the month ends or the cap is raised or cleared. */
  capReached: boolean;
  /** inference, read and/or manage. */
  scopes: string[];
  /** Refused from then on (KeyRefusal.EXPIRED), by the clock of whoever asks; null: never. */
  expiresAt: Date | null;
}

interface Entry<T> {
  value: T;
  loadedAt: number;
}

export interface KeyStatesDeps {
  db: Knex;
  log: Logger;
  clock?: Clock;
  maxEntries?: number;
  maxAgeMs?: number;
}

export function toKeyState(row: KeyStateRow, month: string): KeyState {
  const spend = new Money(row.month_spend_usd);
  return {
    keyId: row.id,
    keyHash: row.key_hash,
    workspaceId: row.workspace_id,
    createdBy: row.created_by,
    status: row.status,
    capUsd: row.monthly_spend_cap_usd,
    routingPolicy: row.routing_policy,
    month,
    spendUsd: row.month_spend_usd,
    capReached: row.monthly_spend_cap_usd !== null && spend.gte(row.monthly_spend_cap_usd),
    scopes: row.scopes,
    expiresAt: row.expires_at,
  };
}

export class KeyStates {
  private readonly keys = new Map<string, Entry<KeyState | undefined>>();
  private readonly hashById = new Map<string, string>();
  /** Balances as billing last reported them; undefined: never reported (the free credit stands). */
  private readonly balances = new Map<string, Entry<Money | undefined>>();
  private readonly loading = new Map<string, Promise<unknown>>();
  /** The sequence number of the last notification of each subject, to spot overlapping loads. */
  private readonly notifiedAt = new Map<string, number>();
  private sequence = 0;
  /** Loads started before this sequence are not cached (notifiedAt was cleared to stay bounded). */
  private forgottenBefore = 0;
  private readonly listener: ReturnType<typeof startPgListener>;
  private readonly clock: Clock;
  private readonly maxEntries: number;
  private readonly maxAgeMs: number;

  constructor(private readonly deps: KeyStatesDeps) {
    this.clock = deps.clock ?? systemClock;
    this.maxEntries = deps.maxEntries ?? 100_000;
    this.maxAgeMs = deps.maxAgeMs ?? 1000;
    this.listener = startPgListener({
      db: deps.db,
      channel: keyStateChannel,
      log: deps.log,
      onNotification: (subject) => this.invalidate(subject),
      onListening: () => this.clear(),
      onLost: () => this.deps.log.warn('key state notifications lost: cached key states are reread every second until they resume'),
    });
  }

  /** The key whose hash is `keyHash` as of now, or undefined when there is none. */
  async byHash(keyHash: string): Promise<KeyState | undefined> {
    const now = this.clock();
    const month = monthOf(now);
    const cached = this.keys.get(keyHash);
    if (cached && this.fresh(cached, now.getTime()) && (!cached.value || cached.value.month === month)) return cached.value;
    return this.load(`hash:${keyHash}`, async () => {
      const row = await findKeyStateByHash(this.deps.db, keyHash, month);
      return row ? toKeyState(row, month) : undefined;
    });
  }

  /** The workspace's balance as billing last reported it; undefined when it never did. */
  async balanceOf(workspaceId: string): Promise<Money | undefined> {
    const cached = this.balances.get(workspaceId);
    if (cached && this.fresh(cached, this.clock().getTime())) return cached.value;
    return this.load(`workspace:${workspaceId}`, async () => {
      const balance = await findBalance(this.deps.db, workspaceId);
      return balance === undefined ? undefined : new Money(balance);
    });
  }

  async stop(): Promise<void> {
    await this.listener.stop();
  }

  private fresh(entry: Entry<unknown>, now: number): boolean {
    return now - entry.loadedAt < this.maxAgeMs;
  }

  /** One load per subject at a time; its result is cached unless a notification overlapped it. */
  private load<T>(subject: string, read: () => Promise<T>): Promise<T> {
    const pending = this.loading.get(subject);
    if (pending) return pending as Promise<T>;
    const startedAt = this.sequence;
    const loadedAt = this.clock().getTime();
    const promise = read()
      .then((value) => {
        this.store(subject, value, startedAt, loadedAt);
        return value;
      })
      .finally(() => this.loading.delete(subject));
    this.loading.set(subject, promise);
    return promise;
  }

  private store(subject: string, value: unknown, startedAt: number, loadedAt: number): void {
    const [kind, id] = splitSubject(subject);
    const state = kind === 'hash' ? (value as KeyState | undefined) : undefined;
    const notified = kind === 'workspace' ? this.notifiedAt.get(subject) : state && this.notifiedAt.get(`key:${state.keyId}`);
    if (startedAt < this.forgottenBefore || (notified !== undefined && notified > startedAt)) return;
    if (kind === 'hash') {
      this.bound(this.keys);
      this.keys.set(id, { value: state, loadedAt });
      if (state) this.hashById.set(state.keyId, id);
    } else {
      this.bound(this.balances);
      this.balances.set(id, { value: value as Money | undefined, loadedAt });
    }
  }

  /** Drops the oldest entries of a full map (insertion order). */
  private bound(map: Map<string, unknown>): void {
    if (map.size < this.maxEntries) return;
    for (const key of map.keys()) {
      map.delete(key);
      if (map.size < this.maxEntries * 0.9) break;
    }
  }

  /** `key:<id>` or `workspace:<id>` changed (a notification, or this replica's own commit): the entry is reloaded at once. */
  invalidate(subject: string): void {
    this.sequence += 1;
    if (this.notifiedAt.size >= 10_000) {
      this.notifiedAt.clear();
      this.forgottenBefore = this.sequence;
    }
    this.notifiedAt.set(subject, this.sequence);
    const [kind, id] = splitSubject(subject);
    if (kind === 'key') {
      const hash = this.hashById.get(id);
      if (!hash || !this.keys.has(hash)) return;
      this.keys.delete(hash);
      // Reloaded now, so the next request finds it in memory; a failure leaves it to that request.
      const month = monthOf(this.clock());
      this.load(`hash:${hash}`, async () => {
        const row = await findKeyStateById(this.deps.db, id, month);
        return row ? toKeyState(row, month) : undefined;
      }).catch((err) => this.deps.log.warn({ err: (err as Error).message, key_id: id }, 'could not reload a key state'));
    } else if (kind === 'workspace') {
      if (!this.balances.delete(id)) return;
      this.balanceOf(id).catch((err) => this.deps.log.warn({ err: (err as Error).message, workspace_id: id }, 'could not reload a balance'));
    }
  }

  private clear(): void {
    this.sequence += 1;
    this.forgottenBefore = this.sequence;
    this.notifiedAt.clear();
    this.keys.clear();
    this.hashById.clear();
    this.balances.clear();
  }
}

function splitSubject(subject: string): [string, string] {
  const colon = subject.indexOf(':');
  return [subject.slice(0, colon), subject.slice(colon + 1)];
}
