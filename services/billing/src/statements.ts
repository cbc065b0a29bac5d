import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { ListLedgerEntriesResponseSchema, StatementSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { invalidArgument } from '@switchboard/runtime/errors';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import type { Accounts } from './accounts.js';
import { listEntries, statementSums } from './store/ledger.js';

/**
 * The ledger's reads (docs/api/billing.md#ledger): its entries, newest change first, and a
 * month's statement. Both wait for the usage answered before the call to be settled, like the
 * balance, so a statement read right after a request includes it.
 */

export interface StatementsDeps {
  db: Knex;
  accounts: Accounts;
  clock?: Clock;
  usageSettled?: () => Promise<unknown>;
}

// From 1970: no account is older, and Date.UTC reads years below 100 as 19xx.
const monthPattern = /^(19[7-9]\d|[2-9]\d{3})-(0[1-9]|1[0-2])$/;

export class Statements {
  constructor(private readonly deps: StatementsDeps) {}

  async entries(workspaceId: string, input: { limit?: number; after?: string }): Promise<MessageInitShape<typeof ListLedgerEntriesResponseSchema>> {
    const limit = parseLimit(input.limit);
    const after = decodeCursor(input.after);
    await this.deps.usageSettled?.();
    await this.deps.accounts.ensure(workspaceId);
    const rows = await listEntries(this.deps.db, workspaceId, { limit, after });
    const page = pageOf(rows, limit, (row) => ({ micros: row.seq, id: row.id }));
    return {
      data: page.rows.map((row) => ({
        entryId: row.id,
        type: row.type,
        amountUsd: row.amount_usd,
        balanceAfterUsd: row.balance_after_usd,
        reference: row.reference,
        occurredAt: timestampFromDate(row.occurred_at),
      })),
      hasMore: page.hasMore,
      nextCursor: page.nextCursor,
    };
  }

  /** The statement of a UTC calendar month up to the current one (which runs to now). */
  async statement(workspaceId: string, month: string): Promise<MessageInitShape<typeof StatementSchema>> {
    const match = monthPattern.exec(month);
    if (!match) throw invalidArgument('month', 'month must be a calendar month in the form YYYY-MM, e.g. 2026-11.');
    const from = new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, 1));
    const to = new Date(Date.UTC(Number(match[1]), Number(match[2]), 1));
    if (from.getTime() > (this.deps.clock ?? systemClock)().getTime()) throw invalidArgument('month', 'month may not be after the current month.');
    await this.deps.usageSettled?.();
    await this.deps.accounts.ensure(workspaceId);
    const sums = await statementSums(this.deps.db, workspaceId, from, to);
    return {
      month,
      currency: 'USD',
      openingBalanceUsd: sums.opening,
      creditsUsd: sums.credits,
      usageUsd: sums.usage,
      usageByTierUsd: { fast: sums.fast, balanced: sums.balanced, passthrough: sums.passthrough, byok: sums.byok },
      refundsUsd: sums.refunds,
      closingBalanceUsd: sums.closing,
    };
  }
}
