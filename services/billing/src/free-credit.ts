import { FreeCreditGrantedSchema, type UserEmailVerifiedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { ReceivedEvent } from '@switchboard/runtime/consumer';
import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import { Money } from '@switchboard/runtime/money';
import type { EventWriter } from '@switchboard/runtime/service';
import type { Accounts } from './accounts.js';
import type { Ledger } from './ledger.js';
import { insertFreeCreditGrant } from './store/free-credits.js';
import { openedBeforeTheLedger } from './store/ledger.js';

/**
 * The free credit (docs/api/billing.md#free-credit-and-the-sandbox): FREE_CREDIT_USD, granted once
 * per user, to the user's personal workspace, when identity reports the email verified
 * (`user.email_verified`). Organizations get none: a person proves one address to get it once,
 * however many workspaces they open.
 *  - Once per user: the grant row (user id primary key) is inserted first, in the transaction of
 *    the credit; a second event for the user (redelivered, or another verification) finds it and
 *    changes nothing, also when both are handled at once by two replicas.
 *  - The credit goes through the ledger (type `free_credit`, reference the user id) with
 *    `billing.free_credit.granted`, all in the consumer's transaction.
 */

/** The balance change every credit goes through (in the caller's transaction). */
export type PostLedgerEntry = Ledger['post'];

export interface FreeCreditsDeps {
  log: Logger;
  accounts: Accounts;
  post: PostLedgerEntry;
  recordEvent: EventWriter;
  /** FREE_CREDIT_USD; "0" grants nothing. */
  amountUsd: string;
}

export class FreeCredits {
  constructor(private readonly deps: FreeCreditsDeps) {}

  /** `user.email_verified`: grants the free credit unless the user had it. */
  async emailVerified(trx: Knex.Transaction, event: ReceivedEvent<typeof UserEmailVerifiedSchema>): Promise<void> {
    const { userId, personalWorkspaceId: workspaceId } = event.data;
    const requestId = event.request_id || undefined;
    if (userId === '' || workspaceId === '') {
      this.deps.log.warn(
        { event_id: event.event_id, user_id: userId, workspace_id: workspaceId },
        'user.email_verified without a user or workspace; no free credit',
      );
      return;
    }
    await this.grant(trx, { userId, workspaceId, requestId });
  }

  /** Grants the credit to `workspaceId` for `userId` inside `trx`; false when the user had it already (or the amount is 0). */
  async grant(trx: Knex.Transaction, input: { userId: string; workspaceId: string; requestId?: string }): Promise<boolean> {
    const { amountUsd, accounts, post, recordEvent, log } = this.deps;
    if (new Money(amountUsd).lte(0)) return false;
    const { userId, workspaceId, requestId } = input;
    // The account first: the grant row references it, and the ledger needs it.
    await accounts.ensureIn(trx, [workspaceId]);
    // Accounts opened before the credit moved to verification got it when they opened.
    if (await openedBeforeTheLedger(trx, workspaceId)) {
      log.info(
        { user_id: userId, workspace_id: workspaceId, request_id: requestId },
        'free credit granted when the account opened (before the ledger); nothing more',
      );
      return false;
    }
    if (!(await insertFreeCreditGrant(trx, { userId, workspaceId, amountUsd }))) {
      log.info({ user_id: userId, workspace_id: workspaceId, request_id: requestId }, 'free credit granted before; nothing more');
      return false;
    }
    const posted = await post(trx, { workspaceId, type: 'free_credit', amountUsd, reference: userId, requestId });
    await recordEvent(trx, FreeCreditGrantedSchema, {
      workspaceId,
      data: { workspaceId, userId, amountUsd, balanceUsd: posted.balanceUsd },
      requestId,
    });
    log.info({ user_id: userId, workspace_id: workspaceId, amount_usd: amountUsd, request_id: requestId }, 'free credit granted');
    return true;
  }
}
