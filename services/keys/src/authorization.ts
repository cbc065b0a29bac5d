import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  type AuthenticateKeyResponseSchema,
  type AuthorizeKeyResponseSchema,
  KeyRefusal,
  KeyRefusalSchema,
} from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { hashKey, isWellFormedKey } from '@switchboard/runtime/api-key-format';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { invalidArgument } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import { formatMoney } from '@switchboard/runtime/money';
import { enumToWire } from '@switchboard/runtime/wire-enum';
import { type BudgetReached, budgetPassedBy } from './budgets.js';
import { keyRefusal } from './cap-leases.js';
import { parseEstimate } from './key-input.js';
import type { KeyState, KeyStates } from './key-states.js';
import { lockKeyBudget } from './store/cap-leases.js';
import { touchKey } from './store/keys.js';
import { insertReservation, releaseReservation } from './store/reservations.js';

/**
 * May this key be used now? The two internal checks of docs/api/keys.md#authorization-for-the-data-plane and docs/api/internal-calls.md#authorizekey, answered from the key
 * states in memory (key-states.ts):
 *  - `authorize` (AuthorizeKey, the data plane): unknown, revoked, expired, spend_cap_exceeded,
 *    insufficient_balance, else allowed; with an estimate, the amount is reserved atomically
 *    against the cap (the only path that touches the database);
 *  - `authenticate` (AuthenticateKey, the gateway for REST calls): the same without the balance
 *    (insufficient_balance never blocks management calls) and without reservations, with the
 *    key's scopes and expiry for the gateway to decide on from its cache.
 * Expiry is decided by this clock at every call, whatever the age of the cached state
 * (docs/api/keys.md#expiry: refused within 1 s needs no event).
 * A key that is not well formed (wrong length, alphabet or checksum) is unknown without a lookup.
 * A use marks `last_used_at`, at most once a minute per key.
 */

/** How long an unsettled reservation holds its amount (docs/api/keys.md#reservations: released after 10 minutes unused). */
export const defaultReservationTtlMs = 10 * 60_000;
const touchIntervalMs = 60_000;

/** A refusal as the `reason` string callers know (docs/decisions.md "Refusal reasons"). */
export const refusalReason = (refusal: KeyRefusal) => enumToWire(KeyRefusalSchema, refusal);

export type AuthorizeAnswer = MessageInitShape<typeof AuthorizeKeyResponseSchema>;
export type AuthenticateAnswer = MessageInitShape<typeof AuthenticateKeyResponseSchema>;

export interface KeyAuthorizerDeps {
  db: Knex;
  log: Logger;
  states: KeyStates;
  clock?: Clock;
  reservationTtlMs?: number;
}

export class KeyAuthorizer {
  private readonly touchedAt = new Map<string, number>();
  private readonly clock: Clock;

  constructor(private readonly deps: KeyAuthorizerDeps) {
    this.clock = deps.clock ?? systemClock;
  }

  /** ReleaseReservation: the reservation stops counting against its key's cap at once. */
  async release(reservationId: string): Promise<void> {
    if (!reservationId) throw invalidArgument('reservation_id', 'reservation_id is required.');
    await releaseReservation(this.deps.db, reservationId);
  }

  async authorize(fullKey: string, rawEstimate?: string): Promise<AuthorizeAnswer> {
    const estimate = rawEstimate === undefined ? undefined : parseEstimate(rawEstimate);
    const state = await this.lookup(fullKey);
    if (!state) return { allowed: false, reason: refusalReason(KeyRefusal.UNKNOWN) };
    const base = { keyId: state.keyId, workspaceId: state.workspaceId, routingPolicy: state.routingPolicy };
    if (state.status === 'revoked') return { ...base, allowed: false, reason: refusalReason(KeyRefusal.REVOKED) };
    if (this.expired(state)) return { ...base, allowed: false, reason: refusalReason(KeyRefusal.EXPIRED) };
    if (state.reached) return { ...base, allowed: false, ...capExceeded(state.reached) };
    const balance = await this.deps.states.balanceOf(state.workspaceId);
    if (balance?.lte(0)) return { ...base, allowed: false, reason: refusalReason(KeyRefusal.INSUFFICIENT_BALANCE) };
    let reservationId: string | undefined;
    if (estimate !== undefined) {
      reservationId = newId('rsv');
      const refusal = await this.reserve(state, reservationId, estimate);
      if (refusal) return { ...base, allowed: false, ...refusal };
    }
    this.touch(state.keyId);
    return { ...base, allowed: true, reason: refusalReason(KeyRefusal.UNSPECIFIED), reservationId };
  }

  async authenticate(fullKey: string): Promise<AuthenticateAnswer> {
    const state = await this.lookup(fullKey);
    if (!state) return { reason: refusalReason(KeyRefusal.UNKNOWN) };
    const base = {
      keyId: state.keyId,
      workspaceId: state.workspaceId,
      createdBy: state.createdBy,
      status: state.status,
      scopes: state.scopes,
      expiresAt: state.expiresAt ? timestampFromDate(state.expiresAt) : undefined,
    };
    if (state.status === 'revoked') return { ...base, reason: refusalReason(KeyRefusal.REVOKED) };
    if (this.expired(state)) return { ...base, reason: refusalReason(KeyRefusal.EXPIRED) };
    if (state.reached) return { ...base, ...capExceeded(state.reached) };
    this.touch(state.keyId);
    return { ...base, reason: refusalReason(KeyRefusal.UNSPECIFIED) };
  }

  /**
   * Reserves `amountUsd` if, for every limit of the key's budget, the period's spend, the open
   * reservations, the unsettled part of the budget's leases and this amount stay at or under the
   * limit; else the refusal. Under the budget's lock, like every lease decision (cap-leases.ts).
   * A key without limits holds nothing back, but its reservation is recorded all the same (settling it is a no-op).
   */
  private reserve(
    state: KeyState,
    id: string,
    amountUsd: string,
  ): Promise<Pick<AuthorizeAnswer, 'reason' | 'capUsd' | 'spendUsd' | 'resetsAt' | 'period'> | undefined> {
    const ttlSeconds = (this.deps.reservationTtlMs ?? defaultReservationTtlMs) / 1000;
    return this.deps.db.transaction(async (trx) => {
      const key = await lockKeyBudget(trx, state.keyId);
      // Decided again under the lock: the cached state may predate a revocation or a sooner expiry.
      const refusal = keyRefusal(key, this.clock());
      if (refusal !== undefined || !key) return { reason: refusalReason(refusal ?? KeyRefusal.UNKNOWN) };
      const passed = await budgetPassedBy(trx, { keyId: state.keyId, budgetId: key.budget_id, monthlyCapUsd: key.cap }, amountUsd, this.clock());
      if (passed) return capExceeded(passed);
      await insertReservation(trx, { id, keyId: state.keyId, amountUsd, ttlSeconds });
      return undefined;
    });
  }

  private expired(state: KeyState): boolean {
    return state.expiresAt !== null && state.expiresAt.getTime() <= this.clock().getTime();
  }

  private lookup(fullKey: string): Promise<KeyState | undefined> | undefined {
    return isWellFormedKey(fullKey) ? this.deps.states.byHash(hashKey(fullKey)) : undefined;
  }

  /** last_used_at, written at most once a minute per key by this replica (and by the statement, across replicas). */
  private touch(keyId: string): void {
    const now = this.clock().getTime();
    if (now - (this.touchedAt.get(keyId) ?? 0) < touchIntervalMs) return;
    if (this.touchedAt.size >= 100_000) this.touchedAt.clear();
    this.touchedAt.set(keyId, now);
    touchKey(this.deps.db, keyId).catch((err) => this.deps.log.warn({ err: (err as Error).message, key_id: keyId }, 'could not record the key use'));
  }
}

/** The facts of a 402 spend_cap_exceeded: `spendUsd` counts open reservations and leases when a reservation was refused. */
function capExceeded(reached: BudgetReached) {
  return {
    reason: refusalReason(KeyRefusal.SPEND_CAP_EXCEEDED),
    capUsd: reached.capUsd,
    spendUsd: formatMoney(reached.spendUsd),
    resetsAt: reached.resetsAt ? timestampFromDate(reached.resetsAt) : undefined,
    period: reached.period,
  };
}
