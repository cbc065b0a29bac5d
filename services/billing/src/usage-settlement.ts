import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { UsageRecord } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { UsageRecordedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { invalidArgument } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import { errorMessage, type Logger } from '@switchboard/runtime/log';
import { regions } from '@switchboard/runtime/model-catalog';
import { formatMoney, Money, parsePlainDecimal } from '@switchboard/runtime/money';
import { type Pricing, type Tier, tiers } from '@switchboard/runtime/pricing';
import type { EventsWriter } from '@switchboard/runtime/service';
import type { Accounts } from './accounts.js';
import { optionalId, requiredId, tokenCount } from './fields.js';
import { generationStatuses } from './generations.js';
import type { Ledger } from './ledger.js';
import { lockAccounts } from './store/accounts.js';
import { settleLeases } from './store/balance-leases.js';
import { type GenerationFacts, insertUsages, type NewUsage } from './store/usage.js';

/**
 * Usage records from the work stream (docs/money-path.md#usage), settled a batch at a time in the
 * consumer's transaction: the new rows inserted in one statement (a generation already recorded,
 * or twice in the batch, is skipped: billed once however often it is delivered), each workspace
 * debited once by the sum of its new rows, the balance leases they were reserved against settled,
 * and one `billing.usage.recorded` per new row; the debits grow the day's usage entries of the
 * ledger (docs/api/billing.md#ledger). The cost debited is the record's `cost_usd`, the
 * one the answer showed (priced by the data plane with the shared pricing module), never priced
 * again: the sum of answered costs is the balances' decrease, exactly. A record that fails its
 * checks is logged and dropped; it never holds up the others. The facts the activity log shows
 * (region, timing, how the answer ended: docs/api/generations.md) are stored beside the usage; one
 * that is not what it must be is stored as null, never the reason to drop what was billed.
 */

export interface UsageSettlementDeps {
  pricing: Pricing;
  accounts: Accounts;
  ledger: Ledger;
  log: Logger;
  recordEvents: EventsWriter;
  clock?: Clock;
}

/** A record that passed its checks: its usage row and the leases it was reserved against. */
interface Checked {
  usage: NewUsage;
  capLeaseId?: string;
  balanceLeaseId?: string;
  /** The workspace budget lease (keys settles it, docs/money-path.md#leases). */
  workspaceLeaseId?: string;
}

/** Costs are unrounded: a passthrough cost has the upstream cost's decimals and the markup's. */
const costLimits = { maxFractionDigits: 60 };

/** The sum of `amount` over the items of each key, with the first item of the key. */
function sumBy<T>(items: T[], key: (item: T) => string, amount: (item: T) => string): Array<{ first: T; sum: Money }> {
  const sums = new Map<string, { first: T; sum: Money }>();
  for (const item of items) {
    const entry = sums.get(key(item));
    if (entry) entry.sum = entry.sum.plus(amount(item));
    else sums.set(key(item), { first: item, sum: new Money(amount(item)) });
  }
  return [...sums.values()];
}

export class UsageSettlement {
  constructor(private readonly deps: UsageSettlementDeps) {}

  /** Settles `records` in `trx` (the batch's transaction). */
  async settle(records: UsageRecord[], trx: Knex.Transaction): Promise<void> {
    const { accounts, recordEvents } = this.deps;
    const byGeneration = new Map<string, Checked>();
    for (const record of records) {
      const checked = this.check(record);
      if (checked && !byGeneration.has(checked.usage.generationId)) byGeneration.set(checked.usage.generationId, checked);
    }
    if (byGeneration.size === 0) return;
    this.warnOfOtherPrices([...byGeneration.values()]);
    // Everything in key order: batches of concurrent consumers wait for each other, never deadlock.
    const checked = [...byGeneration.values()].sort((a, b) => (a.usage.generationId < b.usage.generationId ? -1 : 1));
    const workspaceIds = [...new Set(checked.map(({ usage }) => usage.workspaceId))].sort();
    await accounts.ensureIn(trx, workspaceIds);
    await lockAccounts(trx, workspaceIds);
    const inserted = await insertUsages(
      trx,
      checked.map(({ usage }) => usage),
    );
    const fresh = checked.filter(({ usage }) => inserted.has(usage.generationId));
    if (fresh.length === 0) return;

    const costOf = ({ usage }: Checked) => usage.costUsd;
    const balances = await this.deps.ledger.postUsage(
      trx,
      fresh.map(({ usage }) => ({ workspaceId: usage.workspaceId, tier: usage.tier, amountUsd: usage.costUsd })),
    );
    // A lease settles the usage of its own workspace only (the statement checks it too).
    const leased = fresh.filter((item) => item.balanceLeaseId !== undefined);
    const leaseSums = sumBy(leased, (item) => JSON.stringify([item.balanceLeaseId, item.usage.workspaceId]), costOf);
    await settleLeases(
      trx,
      leaseSums.map(({ first, sum }) => ({ leaseId: first.balanceLeaseId!, workspaceId: first.usage.workspaceId, amountUsd: formatMoney(sum) })),
    );
    await recordEvents(
      trx,
      UsageRecordedSchema,
      fresh.map(({ usage, capLeaseId, workspaceLeaseId }) => {
        const balance = balances.get(usage.workspaceId)!;
        return {
          workspaceId: usage.workspaceId,
          data: {
            usageId: usage.id,
            generationId: usage.generationId,
            keyId: usage.keyId,
            workspaceId: usage.workspaceId,
            model: usage.model,
            routedModel: usage.routedModel ?? undefined,
            tier: usage.tier,
            costUsd: usage.costUsd,
            inputTokens: BigInt(usage.inputTokens),
            outputTokens: BigInt(usage.outputTokens),
            occurredAt: timestampFromDate(usage.occurredAt),
            balanceUsd: balance.afterUsd,
            balanceVersion: BigInt(balance.version),
            capLeaseId,
            workspaceLeaseId,
          },
        };
      }),
    );
  }

  /** The record as a usage row, or undefined (logged) when a field is not what it must be. */
  private check(record: UsageRecord): Checked | undefined {
    try {
      const tier = requiredId(record.tier, 'tier');
      if (!(tiers as readonly string[]).includes(tier)) throw invalidArgument('tier', `tier must be one of ${tiers.join(', ')}.`);
      return {
        usage: {
          id: newId('usg'),
          generationId: requiredId(record.generationId, 'generation_id'),
          workspaceId: requiredId(record.workspaceId, 'workspace_id'),
          keyId: requiredId(record.keyId, 'key_id'),
          model: requiredId(record.model, 'model'),
          routedModel: optionalId(record.routedModel, 'routed_model') ?? null,
          tier: tier as Tier,
          inputTokens: tokenCount(record.inputTokens, 'input_tokens').toString(),
          outputTokens: tokenCount(record.outputTokens, 'output_tokens').toString(),
          upstreamCostUsd: record.upstreamCostUsd === undefined ? null : parsePlainDecimal(record.upstreamCostUsd, 'upstream_cost_usd', costLimits),
          costUsd: parsePlainDecimal(record.costUsd, 'cost_usd', costLimits),
          planId: requiredId(record.planId, 'plan_id'),
          pricingVersion: requiredId(record.pricingVersion, 'pricing_version'),
          reservationId: null,
          occurredAt: record.occurredAt ? timestampDate(record.occurredAt) : (this.deps.clock ?? systemClock)(),
          facts: this.factsOf(record),
        },
        capLeaseId: optionalId(record.capLeaseId, 'cap_lease_id'),
        balanceLeaseId: optionalId(record.balanceLeaseId, 'balance_lease_id'),
        workspaceLeaseId: optionalId(record.workspaceLeaseId, 'workspace_lease_id'),
      };
    } catch (err) {
      this.deps.log.warn({ err: errorMessage(err), generation_id: record.generationId, workspace_id: record.workspaceId }, 'usage record dropped: invalid');
      return undefined;
    }
  }

  /** The record's generation facts, each null when absent or out of its range (logged). */
  private factsOf(record: UsageRecord): GenerationFacts {
    const invalid: string[] = [];
    const checked = <T>(field: string, value: T | undefined, valid: (value: T) => boolean): T | null => {
      if (value === undefined) return null;
      if (valid(value)) return value;
      invalid.push(field);
      return null;
    };
    const millis = (value: number) => Number.isFinite(value) && value >= 0 && value < 2 ** 31;
    const facts: GenerationFacts = {
      region: checked('region', record.region, (region) => (regions as readonly string[]).includes(region)),
      streamed: record.streamed ?? null,
      status: checked('status', record.status, (status) => (generationStatuses as readonly string[]).includes(status)),
      latencyMs: checked('latency_ms', record.latencyMs, millis),
      timeToFirstTokenMs: checked('time_to_first_token_ms', record.timeToFirstTokenMs, millis),
      overheadMs: checked('overhead_ms', record.overheadMs, millis),
      conversationId: checked('conversation_id', record.conversationId, (id) => id !== '' && id.length <= 200),
    };
    if (invalid.length > 0) this.deps.log.warn({ generation_id: record.generationId, fields: invalid }, 'usage record facts out of range: stored as null');
    return facts;
  }

  /**
   * Records priced under another pricing file than billing's are still debited as answered; the
   * difference is worth an operator's look (a data plane not yet given the new file).
   */
  private warnOfOtherPrices(checked: Checked[]): void {
    const { pricing, log } = this.deps;
    const others = new Map<string, number>();
    for (const { usage } of checked) {
      if (usage.pricingVersion !== pricing.version) others.set(usage.pricingVersion, (others.get(usage.pricingVersion) ?? 0) + 1);
    }
    for (const [version, records] of others) {
      log.warn({ pricing_version: version, billing_pricing_version: pricing.version, records }, 'usage priced under another pricing version');
    }
  }
}
