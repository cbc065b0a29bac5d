import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate, type Value } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError } from '@connectrpc/connect';
import type { AutoTopupSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { AutoTopupFailedSchema, AutoTopupUpdatedSchema, BalanceLowSchema, TopupCompletedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { type AuditTrail, audit } from '@switchboard/runtime/audit';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import { afterCommit, type Knex } from '@switchboard/runtime/db';
import { invalidArgument, unprocessable } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import { errorMessage, type Logger } from '@switchboard/runtime/log';
import { Money } from '@switchboard/runtime/money';
import { startPeriodic } from '@switchboard/runtime/periodic';
import type { BackgroundTask, EventWriter } from '@switchboard/runtime/service';
import type { Db } from '@switchboard/runtime/sql';
import { withTimeout } from '@switchboard/runtime/timing';
import type { Accounts } from './accounts.js';
import type { BalanceMove, BalanceWatcher, Ledger } from './ledger.js';
import type { ChargeOutcome, SavedMethodRef } from './providers/provider.js';
import { findAccount, lockAccounts } from './store/accounts.js';
import {
  type AutoTopupRow,
  type AutoTopupSettings,
  type ChargeRow,
  chargedInMonth,
  claimPendingCharges,
  countFailure,
  disableAutoTopup,
  findAutoTopup,
  findCharge,
  insertPendingCharge,
  lockAutoTopup,
  lockCharge,
  markChargeFailed,
  markChargeSucceeded,
  pinChargeMethod,
  releaseCharge,
  resetFailures,
  saveAutoTopup,
  watchingAutoTopups,
} from './store/auto-topups.js';
import { belowMinimum, parseAmount, topupCompletedRecord } from './topups.js';

/**
 * Auto top-up and the low-balance notice (docs/api/billing.md#auto-top-up).
 *  - Crossings: every change of a balance reaches `balanceChanged` in its own transaction, the
 *    account row locked. A move from at or above `threshold_usd` to below it inserts ONE pending
 *    charge: the partial unique index allows one pending charge per workspace, so 50 concurrent
 *    debits start one charge; the month's pending and succeeded charges plus this one must stay
 *    within `monthly_limit_usd` (the account lock serializes that sum). A move below
 *    `low_balance_threshold_usd` sends `billing.balance.low`, once per crossing.
 *  - Charges: a worker claims a pending charge (a lease, `claimed_until`: replicas never attempt
 *    the same charge at once, a dead replica's claim lapses) and charges the saved method off-session
 *    with the charge id as the provider's idempotency key, so retries (after a timeout, an outage,
 *    a crash) never charge twice. The provider's answer, or its event (Stripe webhooks), settles
 *    the charge in `chargeSucceeded` / `chargeFailed`: idempotent, whichever comes first.
 *  - Lock order everywhere: the account, then the charge, then the settings (no deadlock with a
 *    debit, which holds the account and waits on the pending-charge index).
 */

export type AutoTopupRecord = MessageInitShape<typeof AutoTopupSchema>;

export interface AutoTopupsDeps {
  db: Knex;
  log: Logger;
  accounts: Accounts;
  recordEvent: EventWriter;
  /** Where a credited charge is recorded (`topup.completed`, docs/api/audit.md). */
  audit: AuditTrail;
  /** Ledger.post: credits the balance in `trx` (the account must exist). */
  post: Ledger['post'];
  /** PaymentMethods.defaultOf: the method auto top-up charges (the newest saved), if any. */
  defaultMethod(db: Db, workspaceId: string): Promise<SavedMethodRef | undefined>;
  /**
   * provider.chargeOffSession: charges `method` now, idempotency key `charge.id`. Throws (a
   * ConnectError Unavailable) when the outcome is unknown: the charge is attempted again later.
   */
  charge(charge: { id: string; workspaceId: string; amountUsd: string; method: SavedMethodRef }): Promise<ChargeOutcome>;
  /** Records the provider's payment of a credited top-up (refunds and disputes find it). */
  recordProviderPayment(trx: Knex.Transaction, payment: { providerPaymentId: string; workspaceId: string; topupId: string; amountUsd: string }): Promise<void>;
  /** The provider new charges go to (none configured: no method can be saved, so nothing is charged). */
  providerName?: 'sandbox' | 'stripe';
  /** The provider's smallest charge (Stripe: 0.50 USD). */
  minimumChargeUsd?: string;
  /** TOPUP_MAX_USD: the largest amount any of the settings may be. */
  maxAmountUsd: string;
  /** How long one charge call may take before it counts as unanswered (retried later). */
  chargeTimeoutMs: number;
  /** AUTO_TOPUP_RETRY_INTERVAL: how long an unanswered charge waits before it is attempted again; the sweep's period. */
  retryIntervalMs: number;
  clock?: Clock;
}

/** Failed charges in a row that switch auto top-up off. */
export const maxConsecutiveFailures = 3;
/** Attempts of a charge whose provider call failed with an error of ours (not an outage) before it counts as failed. */
const maxAttempts = 5;
/** Charges one claim takes. */
const claimBatch = 10;
/**
 * Failed charges in 24 hours after which no crossing starts another, whatever the settings: a
 * user switching auto top-up off and on again cannot make it try a card without end (card testing).
 */
const maxFailuresPerDay = 6;
/**
 * A charge unanswered this long is counted failed: the provider keeps an idempotency key 24 hours,
 * so a later attempt could charge again. A success the provider reports after that is credited.
 */
const maxChargeAgeMs = 23 * 3_600_000;

const chargeFailedReasons = {
  missingMethod: 'payment_method_missing',
  processing: 'processing_error',
  unanswered: 'provider_unanswered',
  // Charges dropped before they were made, not counted as failures:
  disabled: 'auto_topup_disabled',
  providerChanged: 'provider_changed',
} as const;

/** The first day of the UTC month of `at`, as Postgres reads a date. */
export function monthOf(at: Date): string {
  return `${at.getUTCFullYear()}-${String(at.getUTCMonth() + 1).padStart(2, '0')}-01`;
}

/** `before` at or above `threshold`, `after` below it. */
const crossed = (move: BalanceMove, threshold: string) => new Money(move.beforeUsd).gte(threshold) && new Money(move.afterUsd).lt(threshold);

const settingsFields = ['threshold_usd', 'amount_usd', 'monthly_limit_usd'] as const;

export class AutoTopups implements BalanceWatcher {
  /** The worker's drain in flight, and whether a kick came while it ran. */
  private draining: Promise<void> | undefined;
  private kickedAgain = false;
  private started = false;
  private stopping = false;

  constructor(private readonly deps: AutoTopupsDeps) {}

  private now(): Date {
    return (this.deps.clock ?? systemClock)();
  }

  // --- settings ------------------------------------------------------------------------------

  async get(workspaceId: string): Promise<AutoTopupRecord> {
    const { db, accounts } = this.deps;
    await accounts.ensure(workspaceId);
    const [row, method, charged] = await Promise.all([
      findAutoTopup(db, workspaceId),
      this.deps.defaultMethod(db, workspaceId),
      chargedInMonth(db, workspaceId, monthOf(this.now())),
    ]);
    return this.toRecord(row, method, charged);
  }

  private toRecord(row: AutoTopupRow | undefined, method: SavedMethodRef | undefined, chargedThisMonthUsd: string): AutoTopupRecord {
    return {
      enabled: row?.enabled ?? false,
      thresholdUsd: row?.threshold_usd ?? undefined,
      amountUsd: row?.amount_usd ?? undefined,
      monthlyLimitUsd: row?.monthly_limit_usd ?? undefined,
      lowBalanceThresholdUsd: row?.low_balance_threshold_usd ?? undefined,
      paymentMethodId: method?.id,
      chargedThisMonthUsd,
      consecutiveFailures: row?.consecutive_failures ?? 0,
      disabledReason: row?.disabled_reason ?? undefined,
      updatedAt: row ? timestampFromDate(row.updated_at) : undefined,
    };
  }

  /**
   * Saves the settings (a field left out keeps its saved value, null clears it). Saved enabled
   * while the balance is below the threshold, it counts as a crossing: a charge starts.
   */
  async update(
    caller: { workspaceId: string; userId?: string; requestId?: string },
    input: { enabled?: boolean; thresholdUsd?: Value; amountUsd?: Value; monthlyLimitUsd?: Value; lowBalanceThresholdUsd?: Value },
  ): Promise<AutoTopupRecord> {
    const { db, accounts, maxAmountUsd } = this.deps;
    const max = maxAmountUsd;
    // undefined: keep; null: clear.
    const parsed = {
      threshold_usd: optionalAmount(input.thresholdUsd, max, 'threshold_usd'),
      amount_usd: optionalAmount(input.amountUsd, max, 'amount_usd'),
      monthly_limit_usd: optionalAmount(input.monthlyLimitUsd, max, 'monthly_limit_usd'),
      low_balance_threshold_usd: optionalAmount(input.lowBalanceThresholdUsd, max, 'low_balance_threshold_usd'),
    };
    if (parsed.amount_usd) belowMinimum(parsed.amount_usd, this.deps.minimumChargeUsd);
    const workspaceId = caller.workspaceId;
    await accounts.ensure(workspaceId);
    let method: SavedMethodRef | undefined;
    const row = await db.transaction(async (trx) => {
      await lockAccounts(trx, [workspaceId]);
      const current = await lockAutoTopup(trx, workspaceId);
      // Read with the settings locked: removing the last method (paymentMethodsGone) locks them
      // too, so a method removed concurrently either is not seen here or switches this off after.
      method = await this.deps.defaultMethod(trx, workspaceId);
      const keep = <K extends keyof typeof parsed>(field: K) => (parsed[field] === undefined ? (current?.[field] ?? null) : parsed[field]);
      const settings: AutoTopupSettings = {
        enabled: input.enabled ?? current?.enabled ?? false,
        threshold_usd: keep('threshold_usd'),
        amount_usd: keep('amount_usd'),
        monthly_limit_usd: keep('monthly_limit_usd'),
        low_balance_threshold_usd: keep('low_balance_threshold_usd'),
      };
      if (settings.enabled) {
        const missing = settingsFields.find((field) => settings[field] === null);
        if (missing) throw invalidArgument(missing, `${missing} is required to enable auto top-up (with ${settingsFields.join(', ')}).`);
      }
      if (settings.amount_usd !== null && settings.monthly_limit_usd !== null && new Money(settings.monthly_limit_usd).lt(settings.amount_usd)) {
        throw invalidArgument('monthly_limit_usd', `monthly_limit_usd must be at least amount_usd (${settings.amount_usd}).`);
      }
      if (settings.enabled && !method) {
        throw unprocessable(
          'payment_method_required',
          'Save a payment method first (POST /v1/billing/payment-methods/setup): auto top-up charges it when the balance falls below the threshold.',
          { field: 'enabled' },
        );
      }
      const saved = await saveAutoTopup(trx, workspaceId, settings, {
        userId: caller.userId ?? null,
        resetFailures: settings.enabled && !current?.enabled,
      });
      const changed =
        !current ||
        current.disabled_reason !== null ||
        (['enabled', ...settingsFields, 'low_balance_threshold_usd'] as const).some((f) => current[f] !== saved[f]);
      if (changed) await this.recordUpdated(trx, saved, 'settings', caller.userId, caller.requestId);
      if (saved.enabled && saved.threshold_usd !== null) {
        const account = await findAccount(trx, workspaceId);
        if (account && new Money(account.balance_usd).lt(saved.threshold_usd)) await this.startCharge(trx, saved, 'saved below the threshold');
      }
      return saved;
    });
    audit(this.deps.log, {
      event: 'billing.auto_topup_updated',
      outcome: 'success',
      userId: caller.userId,
      requestId: caller.requestId,
      details: { workspace_id: workspaceId, enabled: row.enabled },
    });
    return this.toRecord(row, method, await chargedInMonth(db, workspaceId, monthOf(this.now())));
  }

  private async recordUpdated(trx: Knex.Transaction, row: AutoTopupRow, reason: string, userId?: string, requestId?: string): Promise<void> {
    await this.deps.recordEvent(trx, AutoTopupUpdatedSchema, {
      workspaceId: row.workspace_id,
      data: {
        workspaceId: row.workspace_id,
        enabled: row.enabled,
        thresholdUsd: row.threshold_usd ?? undefined,
        amountUsd: row.amount_usd ?? undefined,
        monthlyLimitUsd: row.monthly_limit_usd ?? undefined,
        lowBalanceThresholdUsd: row.low_balance_threshold_usd ?? undefined,
        reason,
        updatedBy: reason === 'settings' ? userId : undefined,
      },
      requestId,
    });
  }

  /** The last saved payment method was removed (PaymentMethods, in its transaction): auto top-up switches off. */
  async paymentMethodsGone(trx: Knex.Transaction, workspaceId: string, userId?: string): Promise<void> {
    const current = await lockAutoTopup(trx, workspaceId);
    if (!current?.enabled) return;
    const row = await disableAutoTopup(trx, workspaceId, 'payment_method_removed');
    await this.recordUpdated(trx, row, 'payment_method_removed');
    this.deps.log.info({ workspace_id: workspaceId, user_id: userId }, 'auto top-up switched off: the last payment method was removed');
  }

  // --- crossings -----------------------------------------------------------------------------

  /** In the transaction of a balance change (the accounts locked): the crossings of the moves. */
  async balanceChanged(trx: Knex.Transaction, moves: BalanceMove[]): Promise<void> {
    const falling = moves.filter((move) => new Money(move.afterUsd).lt(move.beforeUsd));
    if (falling.length === 0) return;
    const byWorkspace = new Map(falling.map((move) => [move.workspaceId, move]));
    for (const settings of await watchingAutoTopups(trx, [...byWorkspace.keys()])) {
      const move = byWorkspace.get(settings.workspace_id)!;
      const low = settings.low_balance_threshold_usd;
      if (low !== null && crossed(move, low)) {
        await this.deps.recordEvent(trx, BalanceLowSchema, {
          workspaceId: move.workspaceId,
          data: { workspaceId: move.workspaceId, balanceUsd: move.afterUsd, thresholdUsd: low, balanceVersion: BigInt(move.version) },
        });
      }
      // Money given back to the payer (a refund, a lost dispute) is not charged again at once.
      const givenBack = move.type === 'refund' || move.type === 'dispute';
      if (settings.enabled && settings.threshold_usd !== null && !givenBack && crossed(move, settings.threshold_usd)) {
        await this.startCharge(trx, settings, 'crossing');
      }
    }
  }

  /** One pending charge of `amount_usd`, unless one is pending or the monthly limit would be passed. */
  private async startCharge(trx: Knex.Transaction, settings: AutoTopupRow, why: string): Promise<void> {
    const facts = { workspace_id: settings.workspace_id, amount_usd: settings.amount_usd, why };
    const provider = this.deps.providerName;
    if (!provider) {
      this.deps.log.warn(facts, 'auto top-up not started: no payment provider is configured');
      return;
    }
    const id = newId('atp');
    const started = await insertPendingCharge(trx, {
      id,
      workspaceId: settings.workspace_id,
      amountUsd: settings.amount_usd!,
      month: monthOf(this.now()),
      provider,
      monthlyLimitUsd: settings.monthly_limit_usd!,
      maxFailuresPerDay,
    });
    if (!started) {
      this.deps.log.info(facts, 'auto top-up not started: a charge is pending, the monthly limit would be passed, or too many charges failed today');
      return;
    }
    this.deps.log.info({ ...facts, charge_id: id }, 'auto top-up charge started');
    afterCommit(trx, () => this.kick());
  }

  // --- settling charges ----------------------------------------------------------------------

  /**
   * The provider took the money: credits the charge once (whatever called first: the worker with
   * the provider's answer, or a provider event). A charge counted failed is credited too: the money
   * was taken. False when no charge has this id.
   */
  async chargeSucceeded(chargeId: string, providerPaymentId: string, requestId?: string): Promise<boolean> {
    const { db, log } = this.deps;
    const found = await findCharge(db, chargeId);
    if (!found) return false;
    await db.transaction(async (trx) => {
      await lockAccounts(trx, [found.workspace_id]);
      const charge = await lockCharge(trx, chargeId);
      if (!charge || charge.status === 'succeeded') return;
      const completedAt = await markChargeSucceeded(trx, chargeId, providerPaymentId);
      const posted = await this.deps.post(trx, {
        workspaceId: charge.workspace_id,
        type: 'auto_topup',
        amountUsd: charge.amount_usd,
        reference: charge.id,
        requestId,
      });
      await this.deps.recordProviderPayment(trx, { providerPaymentId, workspaceId: charge.workspace_id, topupId: charge.id, amountUsd: charge.amount_usd });
      await resetFailures(trx, charge.workspace_id);
      await this.deps.recordEvent(trx, TopupCompletedSchema, {
        workspaceId: charge.workspace_id,
        data: {
          checkoutId: charge.id,
          workspaceId: charge.workspace_id,
          amountUsd: charge.amount_usd,
          balanceUsd: posted.balanceUsd,
          balanceVersion: BigInt(posted.version),
          provider: charge.provider,
          completedAt: timestampFromDate(completedAt),
          trigger: 'auto',
        },
        requestId,
      });
      // Started by the platform under the workspace's settings: the system acts, about the user who set auto top-up up.
      const settings = await findAutoTopup(trx, charge.workspace_id);
      await this.deps.audit.record(
        trx,
        topupCompletedRecord(
          { id: charge.id, workspaceId: charge.workspace_id, amountUsd: charge.amount_usd, provider: charge.provider, trigger: 'auto' },
          requestId,
          settings?.updated_by,
        ),
      );
      log.info(
        { charge_id: charge.id, workspace_id: charge.workspace_id, amount_usd: charge.amount_usd, provider_payment_id: providerPaymentId, was: charge.status },
        'auto top-up credited',
      );
    });
    return true;
  }

  /**
   * The charge was declined (or could not be made): `billing.auto_topup.failed`, one more failure
   * in a row, and at 3 auto top-up switches off. Only a pending charge fails; a repeat is ignored.
   * False when no charge has this id.
   */
  async chargeFailed(chargeId: string, reason: string, providerPaymentId?: string, requestId?: string): Promise<boolean> {
    const { db, log } = this.deps;
    const found = await findCharge(db, chargeId);
    if (!found) return false;
    await db.transaction(async (trx) => {
      await lockAccounts(trx, [found.workspace_id]);
      const charge = await lockCharge(trx, chargeId);
      if (charge?.status !== 'pending') return;
      const failedAt = await markChargeFailed(trx, chargeId, reason, providerPaymentId ?? null);
      const failures = await countFailure(trx, charge.workspace_id);
      const settings = await lockAutoTopup(trx, charge.workspace_id);
      const disabled = failures >= maxConsecutiveFailures && settings?.enabled === true;
      if (disabled) await this.recordUpdated(trx, await disableAutoTopup(trx, charge.workspace_id, 'charge_failures'), 'charge_failures');
      await this.deps.recordEvent(trx, AutoTopupFailedSchema, {
        workspaceId: charge.workspace_id,
        data: {
          workspaceId: charge.workspace_id,
          chargeId: charge.id,
          amountUsd: charge.amount_usd,
          reason,
          consecutiveFailures: failures,
          disabled,
          failedAt: timestampFromDate(failedAt),
        },
        requestId,
      });
      log.warn({ charge_id: charge.id, workspace_id: charge.workspace_id, reason, consecutive_failures: failures, disabled }, 'auto top-up charge failed');
    });
    return true;
  }

  /** A pending charge given up before it was made: no failure counted, no event. */
  private async dropCharge(chargeId: string, reason: string): Promise<void> {
    const { db, log } = this.deps;
    const found = await findCharge(db, chargeId);
    if (!found) return;
    await db.transaction(async (trx) => {
      await lockAccounts(trx, [found.workspace_id]);
      const charge = await lockCharge(trx, chargeId);
      if (charge?.status !== 'pending') return;
      await markChargeFailed(trx, chargeId, reason, null);
      log.info({ charge_id: chargeId, workspace_id: charge.workspace_id, reason }, 'auto top-up charge dropped before it was made');
    });
  }

  // --- the worker ----------------------------------------------------------------------------

  /** The charge worker (main.ts): charges started here run at once after their commit; a sweep retries the rest. */
  start(): BackgroundTask {
    this.started = true;
    const sweep = startPeriodic({
      name: 'auto top-up charges',
      everyMs: this.deps.retryIntervalMs,
      firstRunAfterMs: 1000,
      log: this.deps.log,
      run: () => this.drain(),
    });
    return {
      stop: async () => {
        this.stopping = true;
        await sweep.stop();
        await this.draining?.catch(() => undefined);
      },
    };
  }

  /** Attempts the pending charges soon (coalesced with a drain in flight). */
  kick(): void {
    if (!this.started || this.stopping) return;
    void this.drain().catch((err: unknown) => this.deps.log.warn({ err: errorMessage(err) }, 'auto top-up charges failed; retrying at the next sweep'));
  }

  /** Attempts every pending charge no worker holds; resolves when they were attempted. */
  drain(): Promise<void> {
    if (this.draining) {
      this.kickedAgain = true;
      return this.draining;
    }
    this.draining = (async () => {
      try {
        do {
          this.kickedAgain = false;
          for (let round = 0; round < 100 && !this.stopping; round += 1) {
            const claimed = await claimPendingCharges(this.deps.db, claimBatch, this.leaseMs());
            await Promise.all(claimed.map((charge) => this.attempt(charge)));
            if (claimed.length < claimBatch) break;
          }
        } while (this.kickedAgain && !this.stopping);
      } finally {
        this.draining = undefined;
      }
    })();
    return this.draining;
  }

  /** A claim outlasts the charge call's timeout and the settling transaction. */
  private leaseMs(): number {
    return this.deps.chargeTimeoutMs + 30_000;
  }

  /** One attempt of a claimed charge; an unknown outcome leaves it pending, to be attempted again with the same key. */
  private async attempt(claimed: ChargeRow): Promise<void> {
    const { db, log } = this.deps;
    const facts = { charge_id: claimed.id, workspace_id: claimed.workspace_id, attempt: claimed.attempts };
    try {
      let charge = claimed;
      // Another provider takes the payments now: the charge cannot be made with what it pinned.
      if (charge.provider !== this.deps.providerName) {
        await this.dropCharge(charge.id, chargeFailedReasons.providerChanged);
        return;
      }
      // Real time, as the database stamped created_at (the injected clock only moves months in tests).
      if (Date.now() - charge.created_at.getTime() > maxChargeAgeMs) {
        await this.chargeFailed(charge.id, chargeFailedReasons.unanswered);
        return;
      }
      if (!charge.provider_method_id) {
        // Never sent yet: a user who switched auto top-up off since the crossing is not charged.
        if (!(await findAutoTopup(db, charge.workspace_id))?.enabled) {
          await this.dropCharge(charge.id, chargeFailedReasons.disabled);
          return;
        }
        const method = await this.deps.defaultMethod(db, charge.workspace_id);
        if (!method) {
          await this.chargeFailed(charge.id, chargeFailedReasons.missingMethod);
          return;
        }
        if (!(await pinChargeMethod(db, charge.id, method))) {
          const now = await findCharge(db, charge.id);
          if (now?.status !== 'pending' || !now.provider_method_id) return;
          charge = now;
        } else {
          charge = { ...charge, payment_method_id: method.id, provider_method_id: method.providerMethodId, provider_customer_id: method.providerCustomerId };
        }
      }
      const method: SavedMethodRef = {
        id: charge.payment_method_id ?? '',
        providerMethodId: charge.provider_method_id!,
        providerCustomerId: charge.provider_customer_id,
      };
      let outcome: ChargeOutcome;
      try {
        outcome = await withTimeout(
          this.deps.charge({ id: charge.id, workspaceId: charge.workspace_id, amountUsd: charge.amount_usd, method }),
          this.deps.chargeTimeoutMs,
          'the auto top-up charge',
        );
      } catch (err) {
        const outage = err instanceof ConnectError ? err.code === Code.Unavailable || err.code === Code.DeadlineExceeded : /timed out/.test(errorMessage(err));
        if (!outage && charge.attempts >= maxAttempts) {
          log.error({ ...facts, err: errorMessage(err) }, 'auto top-up charge keeps failing; counted as failed');
          await this.chargeFailed(charge.id, chargeFailedReasons.processing);
          return;
        }
        log.warn(
          { ...facts, err: errorMessage(err), retry_in_ms: this.deps.retryIntervalMs },
          'auto top-up charge unanswered; retried with the same idempotency key',
        );
        await releaseCharge(db, charge.id, this.deps.retryIntervalMs);
        return;
      }
      if (outcome.status === 'succeeded') await this.chargeSucceeded(charge.id, outcome.providerPaymentId);
      else await this.chargeFailed(charge.id, outcome.reason, outcome.providerPaymentId);
    } catch (err) {
      // Our own failure (the database): the claim lapses and the sweep attempts it again.
      log.warn({ ...facts, err: errorMessage(err) }, 'auto top-up charge attempt failed; retried later');
    }
  }
}

/** undefined: the field was left out; null: cleared; else an amount as `parseAmount` accepts it. */
function optionalAmount(value: Value | undefined, max: string, field: string): string | null | undefined {
  if (value === undefined) return undefined;
  if (value.kind.case === 'nullValue') return null;
  return parseAmount(value, max, field);
}
