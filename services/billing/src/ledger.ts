import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { BalanceChangedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { Knex } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import { formatMoney, Money } from '@switchboard/runtime/money';
import type { EventWriter } from '@switchboard/runtime/service';
import { adjustBalance, debitAccounts } from './store/accounts.js';
import { addUsageEntries, insertEntry } from './store/ledger.js';

/**
 * The one way a balance changes (docs/api/billing.md#ledger): the balance, its ledger entry and
 * its event in one transaction, so a workspace's entries always sum to its balance and a
 * statement reconciles exactly. Usage is one entry per workspace, UTC day and tier, growing
 * through the day (a request per entry would make the ledger the usage table again). Watchers
 * (auto top-up, the low-balance notice) see every move in the same transaction, so a crossing of
 * a threshold is decided once, under the account's row lock.
 */

export const ledgerTypes = ['free_credit', 'topup', 'auto_topup', 'usage', 'refund', 'dispute', 'adjustment', 'plan_fee'] as const;
export type LedgerType = (typeof ledgerTypes)[number];

/** A balance before and after a change, and the version that change made. */
export interface BalanceMove {
  workspaceId: string;
  /** What moved it: a refund or a lost dispute must not start an auto top-up charge. */
  type: LedgerType;
  beforeUsd: string;
  afterUsd: string;
  version: string;
}

export interface BalanceWatcher {
  balanceChanged(trx: Knex.Transaction, moves: BalanceMove[]): Promise<void>;
}

export interface Posted {
  entryId: string;
  balanceUsd: string;
  beforeUsd: string;
  version: string;
}

export interface LedgerDeps {
  recordEvent: EventWriter;
}

export class Ledger {
  private readonly watchers: BalanceWatcher[] = [];

  constructor(private readonly deps: LedgerDeps) {}

  watch(watcher: BalanceWatcher): void {
    this.watchers.push(watcher);
  }

  /**
   * Changes the balance of an existing account by a signed amount (a refund may take it below
   * zero: the data plane then refuses the workspace's requests), with its entry and
   * `billing.balance.changed`.
   */
  async post(
    trx: Knex.Transaction,
    entry: { workspaceId: string; type: Exclude<LedgerType, 'usage'>; amountUsd: string; reference: string; requestId?: string },
  ): Promise<Posted> {
    const { workspaceId, type, amountUsd, reference } = entry;
    const change = await adjustBalance(trx, workspaceId, amountUsd);
    const beforeUsd = formatMoney(new Money(change.balanceUsd).minus(amountUsd));
    const entryId = newId('led');
    const occurredAt = await insertEntry(trx, { id: entryId, workspaceId, type, amountUsd, balanceAfterUsd: change.balanceUsd, reference });
    await this.deps.recordEvent(trx, BalanceChangedSchema, {
      workspaceId,
      data: {
        workspaceId,
        entryId,
        type,
        amountUsd,
        balanceUsd: change.balanceUsd,
        balanceVersion: BigInt(change.version),
        occurredAt: timestampFromDate(occurredAt),
      },
      requestId: entry.requestId,
    });
    await this.notify(trx, [{ workspaceId, type, beforeUsd, afterUsd: change.balanceUsd, version: change.version }]);
    return { entryId, balanceUsd: change.balanceUsd, beforeUsd, version: change.version };
  }

  /**
   * Debits usage (positive amounts per workspace and tier; the accounts locked by the caller):
   * each workspace once by its sum, today's usage entries grown. Returns the moves by workspace.
   */
  async postUsage(trx: Knex.Transaction, debits: Array<{ workspaceId: string; tier: string; amountUsd: string }>): Promise<Map<string, BalanceMove>> {
    const totals = new Map<string, Money>();
    for (const debit of debits) totals.set(debit.workspaceId, (totals.get(debit.workspaceId) ?? new Money(0)).plus(debit.amountUsd));
    const debited = await debitAccounts(
      trx,
      [...totals].map(([workspaceId, sum]) => ({ workspaceId, amountUsd: formatMoney(sum) })),
    );
    const moves = new Map<string, BalanceMove>(
      debited.map((balance) => [
        balance.workspaceId,
        {
          workspaceId: balance.workspaceId,
          type: 'usage' as const,
          beforeUsd: formatMoney(new Money(balance.balanceUsd).plus(totals.get(balance.workspaceId)!)),
          afterUsd: balance.balanceUsd,
          version: balance.version,
        },
      ]),
    );
    const byTier = new Map<string, { workspaceId: string; tier: string; sum: Money }>();
    for (const debit of debits) {
      const id = `${debit.workspaceId} ${debit.tier}`;
      const entry = byTier.get(id) ?? { workspaceId: debit.workspaceId, tier: debit.tier, sum: new Money(0) };
      byTier.set(id, { ...entry, sum: entry.sum.plus(debit.amountUsd) });
    }
    await addUsageEntries(
      trx,
      [...byTier.values()].map((entry) => ({
        id: newId('led'),
        workspaceId: entry.workspaceId,
        tier: entry.tier,
        amountUsd: formatMoney(entry.sum),
        balanceAfterUsd: moves.get(entry.workspaceId)!.afterUsd,
      })),
    );
    await this.notify(trx, [...moves.values()]);
    return moves;
  }

  private async notify(trx: Knex.Transaction, moves: BalanceMove[]): Promise<void> {
    for (const watcher of this.watchers) await watcher.balanceChanged(trx, moves);
  }
}
