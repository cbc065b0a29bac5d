import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate, type Value } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import type { CheckoutSchema, ListTopupsResponseSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { TopupCompletedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { type AuditRecord, type AuditTrail, audit } from '@switchboard/runtime/audit';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument, unprocessable } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import { Money, parsePlainDecimal } from '@switchboard/runtime/money';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import { sha256Hex } from '@switchboard/runtime/secrets';
import type { EventWriter } from '@switchboard/runtime/service';
import type { Accounts } from './accounts.js';
import type { Ledger } from './ledger.js';
import { noPaymentProvider, type PaymentProvider } from './providers/provider.js';
import type { SandboxProvider } from './providers/sandbox.js';
import {
  type CheckoutRow,
  findCheckoutByKey,
  findCheckoutByTokenHash,
  insertCheckout,
  listCheckouts,
  lockCheckout,
  markCompleted,
  recordProviderEvent,
  setProviderDetails,
} from './store/checkouts.js';
import { recordProviderPayment } from './store/provider-payments.js';

/**
 * Top-ups (docs/api/billing.md#top-ups): a checkout per (workspace, idempotency key), started with the configured
 * payment provider, credited exactly once when the provider says it was paid.
 *  - Idempotency is the unique constraint `checkouts_idempotency_key`: the insert of a retry
 *    waits for the first transaction (which also starts the payment) and then returns its
 *    checkout; another amount under the same key is 422 `idempotency_key_reused`.
 *  - Completion locks the checkout row: of concurrent completions one credits, the others find
 *    it completed. The credit, the status and `billing.topup.completed` share one transaction.
 */

export type CheckoutRecord = MessageInitShape<typeof CheckoutSchema>;

export interface TopupsDeps {
  db: Knex;
  log: Logger;
  accounts: Accounts;
  ledger: Ledger;
  /** The provider new checkouts go to; none configured: creating one is 503 `payment_provider_unavailable`. */
  provider?: PaymentProvider;
  /** Only when the sandbox runs (BILLING_SANDBOX=true, no Stripe): its checkout pages answer, else they are 404. */
  sandbox?: SandboxProvider;
  recordEvent: EventWriter;
  /** Where a completed top-up is recorded (`topup.completed`, docs/api/audit.md). */
  audit: AuditTrail;
  /** The largest top-up accepted (TOPUP_MAX_USD). */
  maxAmountUsd: string;
  /** How long an unpaid checkout stays payable. */
  checkoutTtlMs: number;
}

const maxIdempotencyKeyLength = 255;

/** `amount_usd`: a JSON number or a decimal string, > 0, at most 2 decimals, at most `max`. */
export function parseAmount(value: Value | undefined, max: string, field = 'amount_usd'): string {
  const kind = value?.kind;
  let raw: string;
  if (kind?.case === 'numberValue') {
    if (!Number.isFinite(kind.value)) throw invalidArgument(field, `${field} must be a finite amount.`);
    raw = String(kind.value);
  } else if (kind?.case === 'stringValue') {
    raw = kind.value;
  } else {
    throw invalidArgument(field, `${field} is required: an amount in USD greater than 0, as a number or a decimal string.`);
  }
  const amount = parsePlainDecimal(raw, field, { maxIntegerDigits: 12, maxFractionDigits: 2 });
  if (new Money(amount).lte(0)) throw invalidArgument(field, `${field} must be greater than 0.`);
  if (new Money(amount).gt(max)) throw invalidArgument(field, `${field} may be at most ${max}.`);
  return amount;
}

/** 400 on `field` when the provider takes no charge this small (Stripe: 0.50 USD). */
export function belowMinimum(amountUsd: string, minimumUsd: string | undefined, field = 'amount_usd'): void {
  if (minimumUsd && new Money(amountUsd).lt(minimumUsd)) {
    throw invalidArgument(field, `${field} must be at least ${minimumUsd} with this deployment's payment provider.`);
  }
}

export function parseIdempotencyKey(raw: string, field = 'idempotency_key'): string {
  const length = Array.from(raw).length;
  if (length === 0) throw invalidArgument(field, `${field} is required (1 to ${maxIdempotencyKeyLength} characters), e.g. topup-2026-11-23-1.`);
  if (length > maxIdempotencyKeyLength) throw invalidArgument(field, `${field} may be at most ${maxIdempotencyKeyLength} characters.`);
  return raw;
}

const checkoutNotFound = () => apiError(Code.NotFound, 'checkout_not_found', 'No such checkout.');

export class Topups {
  constructor(private readonly deps: TopupsDeps) {}

  toRecord(row: CheckoutRow): CheckoutRecord {
    return {
      checkoutId: row.id,
      // A sandbox checkout of before Stripe was configured has no page any more (its route is 404).
      checkoutUrl: row.checkout_url ?? this.deps.sandbox?.urlOf(row) ?? '',
      amountUsd: row.amount_usd,
      status: row.status,
      idempotencyKey: row.idempotency_key,
      createdAt: timestampFromDate(row.created_at),
      completedAt: row.completed_at ? timestampFromDate(row.completed_at) : undefined,
    };
  }

  async create(
    caller: { workspaceId: string; userId?: string; requestId?: string },
    input: { amount?: Value; idempotencyKey: string },
  ): Promise<CheckoutRecord> {
    const amountUsd = parseAmount(input.amount, this.deps.maxAmountUsd);
    const idempotencyKey = parseIdempotencyKey(input.idempotencyKey);
    const { db, provider, accounts } = this.deps;
    if (!provider) throw noPaymentProvider();
    belowMinimum(amountUsd, provider.minimumChargeUsd);
    await accounts.ensure(caller.workspaceId);
    const id = newId('chk');
    const expiresAt = new Date(Date.now() + this.deps.checkoutTtlMs);
    await db.transaction(async (trx) => {
      const inserted = await insertCheckout(trx, {
        id,
        workspaceId: caller.workspaceId,
        idempotencyKey,
        amountUsd,
        provider: provider.name,
        expiresAt,
        createdBy: caller.userId ?? null,
      });
      if (inserted) await setProviderDetails(trx, id, await provider.start({ id, workspaceId: caller.workspaceId, amountUsd, idempotencyKey, expiresAt }));
    });
    const row = await findCheckoutByKey(db, caller.workspaceId, idempotencyKey);
    if (!row) throw new Error('the checkout of an idempotency key vanished');
    if (!new Money(row.amount_usd).eq(amountUsd)) {
      throw unprocessable('idempotency_key_reused', `This idempotency_key was used for a top-up of ${row.amount_usd} USD; use a new key for another amount.`, {
        field: 'idempotency_key',
      });
    }
    if (row.id === id) {
      audit(this.deps.log, {
        event: 'billing.checkout_created',
        outcome: 'success',
        userId: caller.userId,
        requestId: caller.requestId,
        details: { checkout_id: id, workspace_id: caller.workspaceId, provider: provider.name },
      });
    }
    return this.toRecord(row);
  }

  async list(workspaceId: string, input: { limit?: number; after?: string }): Promise<MessageInitShape<typeof ListTopupsResponseSchema>> {
    const limit = parseLimit(input.limit);
    const after = decodeCursor(input.after);
    const rows = await listCheckouts(this.deps.db, workspaceId, { limit, after });
    const page = pageOf(rows, limit, (row) => ({ micros: row.cursor_micros, id: row.id }));
    return { data: page.rows.map((row) => this.toRecord(row)), hasMore: page.hasMore, nextCursor: page.nextCursor };
  }

  /** The sandbox checkout a page token opens (404 for any other token); a plain read, no lock. */
  async sandboxCheckout(token: string): Promise<CheckoutRow> {
    const row = token && this.deps.sandbox ? await findCheckoutByTokenHash(this.deps.db, sha256Hex(token)) : undefined;
    if (!row) throw checkoutNotFound();
    return row;
  }

  /** Completes the sandbox checkout of a page token: credits once, however often it is called. */
  async completeSandbox(token: string, requestId?: string): Promise<CheckoutRecord> {
    // With the sandbox off (Stripe configured, or no provider) no token opens anything, old ones neither.
    if (!token || !this.deps.sandbox) throw checkoutNotFound();
    const row = await this.deps.db.transaction(async (trx) => {
      const checkout = await lockCheckout(trx, { tokenHash: sha256Hex(token) });
      if (!checkout) throw checkoutNotFound();
      return this.complete(trx, checkout, requestId);
    });
    return this.toRecord(row);
  }

  /**
   * Completes the checkout of a provider's session once per provider event: a replayed event
   * (same id) changes nothing. Returns false when the session names no checkout of ours. The
   * provider took the money, so a checkout that reads expired by now (a late or retried delivery,
   * a delayed payment method) is still credited.
   */
  async completeByProvider(input: {
    provider: string;
    eventId: string;
    sessionId: string;
    /** The provider's payment (Stripe: the PaymentIntent), recorded with the credit: what refunds and disputes are debited against. */
    providerPaymentId?: string;
    requestId?: string;
  }): Promise<boolean> {
    return this.deps.db.transaction(async (trx) => {
      if (!(await recordProviderEvent(trx, input.provider, input.eventId))) return true;
      const checkout = await lockCheckout(trx, { providerSessionId: input.sessionId });
      if (!checkout) return false;
      await this.complete(trx, checkout, input.requestId, { paidByProvider: true });
      if (input.providerPaymentId) {
        const payment = {
          providerPaymentId: input.providerPaymentId,
          workspaceId: checkout.workspace_id,
          topupId: checkout.id,
          amountUsd: checkout.amount_usd,
        };
        await recordProviderPayment(trx, payment);
      }
      return true;
    });
  }

  private async complete(trx: Knex.Transaction, checkout: CheckoutRow, requestId?: string, options: { paidByProvider?: boolean } = {}): Promise<CheckoutRow> {
    if (checkout.status === 'completed') return checkout;
    if (checkout.status !== 'pending' && !(checkout.status === 'expired' && options.paidByProvider)) {
      const code = checkout.status === 'expired' ? 'checkout_expired' : 'checkout_failed';
      throw apiError(Code.FailedPrecondition, code, `This checkout is ${checkout.status}; start a new top-up.`, { httpStatus: 409 });
    }
    const completedAt = await markCompleted(trx, checkout.id);
    const balance = await this.deps.ledger.post(trx, {
      workspaceId: checkout.workspace_id,
      type: 'topup',
      amountUsd: checkout.amount_usd,
      reference: checkout.id,
      requestId,
    });
    await this.deps.recordEvent(trx, TopupCompletedSchema, {
      workspaceId: checkout.workspace_id,
      data: {
        checkoutId: checkout.id,
        workspaceId: checkout.workspace_id,
        amountUsd: checkout.amount_usd,
        balanceUsd: balance.balanceUsd,
        balanceVersion: BigInt(balance.version),
        provider: checkout.provider,
        completedAt: timestampFromDate(completedAt),
        trigger: 'manual',
      },
      requestId,
    });
    // Completed by the provider's event or the sandbox's page, never by a user's signed-in call: the system acts.
    await this.deps.audit.record(
      trx,
      topupCompletedRecord(
        { id: checkout.id, workspaceId: checkout.workspace_id, amountUsd: checkout.amount_usd, provider: checkout.provider, trigger: 'manual' },
        requestId,
        checkout.created_by,
      ),
    );
    this.deps.log.info(
      { checkout_id: checkout.id, workspace_id: checkout.workspace_id, amount_usd: checkout.amount_usd, request_id: requestId },
      'top-up credited',
    );
    return { ...checkout, status: 'completed', completed_at: completedAt };
  }
}

/**
 * The audit record of a credited top-up (docs/api/audit.md): the system acts (a provider's event,
 * the sandbox's page, or auto top-up under the workspace's settings), about the user who started it.
 */
export function topupCompletedRecord(
  topup: { id: string; workspaceId: string; amountUsd: string; provider: string; trigger: 'manual' | 'auto' },
  requestId: string | undefined,
  startedBy: string | null | undefined,
): AuditRecord {
  return {
    action: 'topup.completed',
    outcome: 'success',
    actor: { type: 'system', id: '' },
    target: { type: 'topup', id: topup.id },
    workspaceId: topup.workspaceId,
    requestId,
    subjectUserId: startedBy ?? undefined,
    metadata: { amount_usd: topup.amountUsd, provider: topup.provider, trigger: topup.trigger },
  };
}
