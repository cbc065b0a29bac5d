import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import type { ListPaymentMethodsResponseSchema, PaymentMethodSchema, PaymentMethodSetupSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { PaymentMethodRemovedSchema, PaymentMethodSavedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { audit } from '@switchboard/runtime/audit';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import { sha256Hex } from '@switchboard/runtime/secrets';
import type { EventWriter } from '@switchboard/runtime/service';
import type { Db } from '@switchboard/runtime/sql';
import type { Accounts } from './accounts.js';
import { noPaymentProvider, type PaymentProvider, type SavedMethodRef } from './providers/provider.js';
import { type SandboxCard, type SandboxProvider, sandboxCards, sandboxMethodId } from './providers/sandbox.js';
import type { SavedCard, StripeProvider } from './providers/stripe.js';
import { lockAccounts } from './store/accounts.js';
import {
  deletePaymentMethod,
  findCustomer,
  findPaymentMethod,
  findSetup,
  insertCustomer,
  insertPaymentMethod,
  insertSetup,
  listPaymentMethods,
  lockSetup,
  markSetupCompleted,
  newestPaymentMethod,
  type PaymentMethodRow,
  type SetupRow,
  setSetupDetails,
} from './store/payment-methods.js';

/**
 * Saved payment methods (docs/api/billing.md#payment-methods): what auto top-up charges.
 *  - A setup is a page where the user saves a card: Stripe Checkout in setup mode for the
 *    workspace's Stripe Customer (created once), or the sandbox's page with its test cards.
 *  - A setup saves at most one method, however often it completes (the setup row is locked,
 *    and `payment_methods.setup_id` is unique); the method, the setup's status and
 *    `billing.payment_method.saved` share one transaction.
 *  - The newest method (of the configured provider) is the default, the one auto top-up charges.
 *  - Removing one detaches it at the provider first (a 503 there removes nothing); removing the
 *    last one switches auto top-up off in the same transaction (`onLastRemoved`).
 */

export type PaymentMethodRecord = MessageInitShape<typeof PaymentMethodSchema>;

export interface PaymentMethodsDeps {
  db: Knex;
  log: Logger;
  accounts: Accounts;
  /** The provider new setups go to; none configured: starting one is 503 `payment_provider_unavailable`. */
  provider?: PaymentProvider;
  /** Only when the sandbox runs: its setup pages answer, else they are 404. */
  sandbox?: SandboxProvider;
  /** Set when Stripe is configured: reads the cards of completed setups, detaches Stripe's. */
  stripe?: StripeProvider;
  recordEvent: EventWriter;
  /** How long a setup page accepts a card. */
  setupTtlMs: number;
  /** Called in the transaction that removed the workspace's last method (auto top-up switches off). */
  onLastRemoved?: (trx: Knex.Transaction, workspaceId: string, userId?: string) => Promise<void>;
}

const setupNotFound = () => apiError(Code.NotFound, 'setup_not_found', 'No such payment-method setup.');
const methodNotFound = () => apiError(Code.NotFound, 'payment_method_not_found', 'The workspace has no saved payment method with this id.');

export class PaymentMethods {
  constructor(private readonly deps: PaymentMethodsDeps) {}

  /** Starts a setup page for the caller's workspace. */
  async createSetup(caller: { workspaceId: string; userId?: string; requestId?: string }): Promise<MessageInitShape<typeof PaymentMethodSetupSchema>> {
    const { db, provider, accounts } = this.deps;
    if (!provider) throw noPaymentProvider();
    await accounts.ensure(caller.workspaceId);
    const customerId = provider.createCustomer ? await this.customerOf(caller.workspaceId, provider) : undefined;
    const id = newId('pms');
    const expiresAt = new Date(Date.now() + this.deps.setupTtlMs);
    await db.transaction(async (trx) => {
      await insertSetup(trx, { id, workspaceId: caller.workspaceId, provider: provider.name, expiresAt, createdBy: caller.userId ?? null });
      await setSetupDetails(trx, id, await provider.startSetup({ id, workspaceId: caller.workspaceId, expiresAt, customerId }));
    });
    const row = await findSetup(db, { id });
    if (!row) throw new Error('a new payment-method setup vanished');
    audit(this.deps.log, {
      event: 'billing.payment_method_setup_created',
      outcome: 'success',
      userId: caller.userId,
      requestId: caller.requestId,
      details: { setup_id: id, workspace_id: caller.workspaceId, provider: provider.name },
    });
    return { setupId: row.id, setupUrl: row.setup_url ?? this.deps.sandbox?.setupUrlOf(row) ?? '', expiresAt: timestampFromDate(row.expires_at) };
  }

  async list(workspaceId: string, input: { limit?: number; after?: string }): Promise<MessageInitShape<typeof ListPaymentMethodsResponseSchema>> {
    const limit = parseLimit(input.limit);
    const after = decodeCursor(input.after);
    const rows = await listPaymentMethods(this.deps.db, workspaceId, { limit, after });
    const page = pageOf(rows, limit, (row) => ({ micros: row.cursor_micros, id: row.id }));
    // The default is the newest of the whole list, which need not be on this page.
    const defaultId = page.rows.length > 0 ? (await this.newestOf(this.deps.db, workspaceId))?.id : undefined;
    return { data: page.rows.map((row) => toRecord(row, row.id === defaultId)), hasMore: page.hasMore, nextCursor: page.nextCursor };
  }

  /** The method auto top-up charges: the newest saved with the configured provider. */
  async defaultOf(db: Db, workspaceId: string): Promise<SavedMethodRef | undefined> {
    const row = await this.newestOf(db, workspaceId);
    return row && refOf(row);
  }

  async remove(caller: { workspaceId: string; userId?: string; requestId?: string }, paymentMethodId: string): Promise<void> {
    const { db } = this.deps;
    const row = paymentMethodId ? await findPaymentMethod(db, caller.workspaceId, paymentMethodId) : undefined;
    if (!row) throw methodNotFound();
    // Detached at the provider first: when that fails the card stays listed (and chargeable),
    // never the other way round, a card the user removed still chargeable at Stripe.
    if (row.provider === 'sandbox') await this.deps.sandbox?.detach();
    else if (this.deps.stripe) await this.deps.stripe.detach(refOf(row));
    else this.deps.log.warn({ payment_method_id: row.id }, 'Stripe is no longer configured: the card is forgotten here but stays at Stripe');
    await db.transaction(async (trx) => {
      // The account first, as auto top-up's saves lock it: a save enabling it and the removal of
      // the last card run one after the other, so the save sees no card or the removal switches it off.
      await lockAccounts(trx, [caller.workspaceId]);
      const { deleted, left } = await deletePaymentMethod(trx, caller.workspaceId, row.id);
      if (!deleted) return; // a concurrent removal did it
      await this.deps.recordEvent(trx, PaymentMethodRemovedSchema, {
        workspaceId: caller.workspaceId,
        data: { workspaceId: caller.workspaceId, paymentMethodId: row.id, removedBy: caller.userId },
        requestId: caller.requestId,
      });
      if (left === 0) await this.deps.onLastRemoved?.(trx, caller.workspaceId, caller.userId);
    });
    audit(this.deps.log, {
      event: 'billing.payment_method_removed',
      outcome: 'success',
      userId: caller.userId,
      requestId: caller.requestId,
      details: { payment_method_id: row.id, workspace_id: caller.workspaceId },
    });
  }

  /** The sandbox setup a page token opens (404 for any other token, or when Stripe takes the payments). */
  async sandboxSetup(token: string): Promise<SetupRow> {
    if (!this.deps.sandbox || this.deps.provider?.name !== 'sandbox' || !token) throw setupNotFound();
    const row = await findSetup(this.deps.db, { tokenHash: sha256Hex(token) });
    if (row?.provider !== 'sandbox') throw setupNotFound();
    return row;
  }

  /** Saves the sandbox test card of a page token: one method per setup, however often it is called. */
  async completeSandboxSetup(token: string, card: string, requestId?: string): Promise<PaymentMethodRecord> {
    const chosen = (card || '4242') as SandboxCard;
    if (!sandboxCards.includes(chosen))
      throw invalidArgument('card', 'card must be one of the sandbox test cards "4242" (charges succeed) and "0341" (charges are declined).');
    if (!this.deps.sandbox || this.deps.provider?.name !== 'sandbox' || !token) throw setupNotFound();
    const method = await this.deps.db.transaction(async (trx) => {
      const setup = await lockSetup(trx, { tokenHash: sha256Hex(token) });
      if (setup?.provider !== 'sandbox') throw setupNotFound();
      const expYear = new Date().getUTCFullYear() + 3;
      return this.save(
        trx,
        setup,
        { providerMethodId: sandboxMethodId(chosen, setup.id), providerCustomerId: null, brand: 'visa', last4: chosen, expMonth: 12, expYear },
        requestId,
      );
    });
    return this.recordOf(method);
  }

  /**
   * Saves the card of a completed Stripe setup session once; false when the session is no setup
   * of ours. Stripe is asked for the card first (a failure there is a 503: Stripe delivers again).
   */
  async completeByProvider(input: { sessionId: string; setupIntentId: string; requestId?: string }): Promise<boolean> {
    const { stripe, db } = this.deps;
    if (!stripe) return false;
    const known = await findSetup(db, { providerSessionId: input.sessionId });
    if (!known) return false;
    if (known.status === 'completed') return true;
    const card = await stripe.savedCard(input.setupIntentId);
    await db.transaction(async (trx) => {
      const setup = await lockSetup(trx, { providerSessionId: input.sessionId });
      // A concurrent delivery may have saved it meanwhile.
      if (setup && setup.status !== 'completed') await this.save(trx, setup, card, input.requestId);
    });
    return true;
  }

  /** Customer ids are kept: Stripe's idempotency keys last a day, the customer forever. */
  private async customerOf(workspaceId: string, provider: PaymentProvider): Promise<string | undefined> {
    const known = await findCustomer(this.deps.db, workspaceId, provider.name);
    if (known) return known;
    const created = await provider.createCustomer?.(workspaceId);
    return created && insertCustomer(this.deps.db, workspaceId, provider.name, created);
  }

  /**
   * Saves the card of a locked setup unless it saved one before (then answers that one). The
   * provider took the card, so a setup that reads expired by now is still completed for Stripe;
   * a sandbox page past its expiry is 409 `setup_expired`.
   */
  private async save(trx: Knex.Transaction, setup: SetupRow, card: SavedCard, requestId?: string): Promise<PaymentMethodRow> {
    if (setup.status === 'completed' && setup.payment_method_id) {
      const saved = await findPaymentMethod(trx, setup.workspace_id, setup.payment_method_id);
      if (saved) return saved;
      throw apiError(Code.FailedPrecondition, 'setup_expired', 'This setup saved a card that was removed since; start a new one.', { httpStatus: 409 });
    }
    if (setup.status === 'expired' && setup.provider === 'sandbox') {
      throw apiError(Code.FailedPrecondition, 'setup_expired', 'This setup page expired before a card was saved; start a new one.', { httpStatus: 409 });
    }
    const method = await insertPaymentMethod(trx, {
      id: newId('pm'),
      workspace_id: setup.workspace_id,
      provider: setup.provider,
      provider_method_id: card.providerMethodId,
      provider_customer_id: card.providerCustomerId,
      brand: card.brand,
      last4: card.last4,
      exp_month: card.expMonth,
      exp_year: card.expYear,
      setup_id: setup.id,
      created_by: setup.created_by,
    });
    await markSetupCompleted(trx, setup.id, method.id);
    await this.deps.recordEvent(trx, PaymentMethodSavedSchema, {
      workspaceId: setup.workspace_id,
      data: { workspaceId: setup.workspace_id, paymentMethodId: method.id, brand: method.brand, last4: method.last4 },
      requestId,
    });
    this.deps.log.info({ payment_method_id: method.id, setup_id: setup.id, workspace_id: setup.workspace_id, request_id: requestId }, 'payment method saved');
    return method;
  }

  private async recordOf(row: PaymentMethodRow): Promise<PaymentMethodRecord> {
    return toRecord(row, (await this.newestOf(this.deps.db, row.workspace_id))?.id === row.id);
  }

  /** The default: the newest method saved with the configured provider (none without one). */
  private async newestOf(db: Db, workspaceId: string): Promise<PaymentMethodRow | undefined> {
    if (!this.deps.provider) return undefined;
    return newestPaymentMethod(db, workspaceId, this.deps.provider.name);
  }
}

function refOf(row: PaymentMethodRow): SavedMethodRef {
  return { id: row.id, providerMethodId: row.provider_method_id, providerCustomerId: row.provider_customer_id };
}

function toRecord(row: PaymentMethodRow, isDefault: boolean): PaymentMethodRecord {
  return {
    paymentMethodId: row.id,
    brand: row.brand,
    last4: row.last4,
    expMonth: row.exp_month,
    expYear: row.exp_year,
    default: isDefault,
    createdAt: timestampFromDate(row.created_at),
  };
}
