import { timestampDate } from '@bufbuild/protobuf/wkt';
import {
  type BalanceChangedSchema,
  KeyUpdatedSchema,
  SpendAlertSchema,
  type UsageRecordedSchema,
} from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { ReceivedEvent } from '@switchboard/runtime/consumer';
import type { Knex } from '@switchboard/runtime/db';
import type { Logger } from '@switchboard/runtime/log';
import { formatMoney, Money } from '@switchboard/runtime/money';
import type { PgNotifier } from '@switchboard/runtime/pg-notifications';
import type { EventWriter } from '@switchboard/runtime/service';
import { monthLabel, monthOf } from './months.js';
import { type Period, periodStart, periods } from './periods.js';
import { recordBalance } from './store/balances.js';
import { addBudgetSpends } from './store/budget-spend.js';
import { settleLeases } from './store/cap-leases.js';
import { settleReservations } from './store/reservations.js';
import { addSpends, type BudgetSettingsRow, findBudgetSettings, insertBudgetAlert } from './store/spend.js';

/**
 * Spend per budget and period and what follows from it (docs/api/keys.md#periodic-budgets,
 * docs/api/billing.md#usage-ingestion), from billing's events, a batch at a time. Each handler runs
 * inside the consumer's transaction, which also records the event ids, so a redelivered event
 * changes nothing (runtime/consumer.ts). Per batch of usage:
 *  - the costs are added to every period of the key's budget (its budget id: rotated keys share
 *    one) and of its workspace, each in the period its usage occurred in: one statement for the
 *    months of keys (key_monthly_spend), one for every other period (budget_spend);
 *  - reservations named are settled, and the cost of each usage that names a cap lease or a
 *    workspace lease is added to the lease's settled part, so its room moves from the lease to the
 *    spend at once;
 *  - alerts, for a key with an alert webhook: each threshold of each limit of the key (day, week,
 *    month, total), once per budget, period and threshold, when the period's spend first reaches
 *    it (the primary key of budget_alerts decides "once", also across replicas);
 *  - reaching any limit also emits `key.updated` (change cap_reached), so gateways drop their
 *    cached "allowed" for the key at once;
 *  - the workspace balance after the debit is kept for `insufficient_balance`, ordered by
 *    billing's balance version (a late event never undoes a newer balance).
 * Every replica's key states are told once the transaction committed.
 */

export interface SpendDeps {
  log: Logger;
  recordEvent: EventWriter;
  /** Tells every replica's key states that a key's spend or a balance changed, once committed. */
  notifier: PgNotifier;
}

const plainDecimal = /^-?\d+(\.\d+)?$/;
/** Thresholds of a key with an alert webhook but none stored (docs/api/keys.md#spend-alerts). */
const defaultThresholds = [80, 100];

type UsageEvent = ReceivedEvent<typeof UsageRecordedSchema>;
type BalanceEvent = ReceivedEvent<typeof UsageRecordedSchema | typeof BalanceChangedSchema>;

/** The usage of one budget (or workspace) in one period within a batch. */
interface PeriodSum {
  subject: string;
  period: Period;
  periodStart: string;
  cost: Money;
  count: number;
  /** The request and month of the group's last usage, for the events it causes. */
  requestId: string;
  month: string;
}

/** Sums costs (and counts) by a key; the other fields are the group's last item's. */
class Sums<T extends { cost: Money; count?: number }> {
  readonly groups = new Map<string, T>();
  add(id: string, item: T): void {
    const known = this.groups.get(id);
    this.groups.set(id, known ? { ...item, cost: known.cost.plus(item.cost), count: (known.count ?? 0) + (item.count ?? 0) } : item);
  }
}

export class Spend {
  constructor(private readonly deps: SpendDeps) {}

  /** `billing.usage.recorded`, a batch of events not seen before. */
  async usageRecorded(trx: Knex.Transaction, events: UsageEvent[]): Promise<void> {
    const usable: Array<{ event: UsageEvent; at: Date }> = [];
    for (const event of events) {
      const { keyId, costUsd } = event.data;
      const at = event.data.occurredAt ? timestampDate(event.data.occurredAt) : new Date(event.occurred_at);
      if (!keyId || !plainDecimal.test(costUsd) || new Money(costUsd).isNegative() || Number.isNaN(at.getTime())) {
        this.deps.log.error({ event_id: event.event_id }, 'ignored a billing.usage.recorded event without a key, a cost or a time');
        continue;
      }
      usable.push({ event, at });
    }
    await this.balancesReported(
      trx,
      usable.map(({ event }) => event),
    );
    const settings = new Map((await findBudgetSettings(trx, [...new Set(usable.map(({ event }) => event.data.keyId))])).map((row) => [row.id, row]));
    const months = new Sums<PeriodSum>();
    const periodSums = new Sums<PeriodSum>();
    const capLeases = new Sums<{ leaseId: string; subjectId: string; cost: Money }>();
    const workspaceLeases = new Sums<{ leaseId: string; subjectId: string; cost: Money }>();
    const reservations: Array<{ reservationId: string; keyId: string }> = [];
    for (const { event, at } of usable) {
      const { keyId, costUsd, reservationId, capLeaseId, workspaceLeaseId } = event.data;
      const key = settings.get(keyId);
      if (!key) {
        // A key of no workspace we know (another deployment's data plane, or a deleted test row).
        this.deps.log.warn({ event_id: event.event_id, key_id: keyId }, 'usage for an unknown key: not counted');
        continue;
      }
      const cost = new Money(costUsd);
      const month = monthOf(at);
      const sum = (subject: string, period: Period): PeriodSum => ({
        subject,
        period,
        periodStart: periodStart(period, at),
        cost,
        count: 1,
        requestId: event.request_id,
        month,
      });
      months.add(`${key.budget_id} ${month}`, sum(key.budget_id, 'month'));
      for (const period of periods) {
        if (period !== 'month') periodSums.add(`${key.budget_id} ${period} ${periodStart(period, at)}`, sum(key.budget_id, period));
        periodSums.add(`${key.workspace_id} ${period} ${periodStart(period, at)}`, sum(key.workspace_id, period));
      }
      if (reservationId) reservations.push({ reservationId, keyId });
      if (capLeaseId) capLeases.add(`${capLeaseId} ${key.budget_id}`, { leaseId: capLeaseId, subjectId: key.budget_id, cost });
      if (workspaceLeaseId) workspaceLeases.add(`${workspaceLeaseId} ${key.workspace_id}`, { leaseId: workspaceLeaseId, subjectId: key.workspace_id, cost });
    }
    if (months.groups.size === 0) return;
    const monthTotals = await addSpends(
      trx,
      [...months.groups.values()].map((sum) => ({ keyId: sum.subject, month: sum.periodStart, costUsd: formatMoney(sum.cost), count: sum.count })),
    );
    const periodTotals = await addBudgetSpends(
      trx,
      [...periodSums.groups.values()].map((sum) => ({
        subject: sum.subject,
        period: sum.period,
        periodStart: sum.periodStart,
        costUsd: formatMoney(sum.cost),
        count: sum.count,
      })),
    );
    await settleReservations(trx, reservations);
    const settled = (sums: Sums<{ leaseId: string; subjectId: string; cost: Money }>) =>
      [...sums.groups.values()].map((lease) => ({ leaseId: lease.leaseId, subjectId: lease.subjectId, costUsd: formatMoney(lease.cost) }));
    await settleLeases(trx, 'key', settled(capLeases));
    await settleLeases(trx, 'workspace', settled(workspaceLeases));
    // Budget totals in period order (day, week, month, total), so alerts go out in that order.
    const totals = [
      ...monthTotals.map((total) => ({ sum: months.groups.get(`${total.key_id} ${total.month}`)!, after: new Money(total.spend_usd) })),
      ...periodTotals.map((total) => ({
        sum: periodSums.groups.get(`${total.subject} ${total.period} ${total.period_start}`)!,
        after: new Money(total.spend_usd),
      })),
    ].sort((a, b) => periods.indexOf(a.sum.period) - periods.indexOf(b.sum.period));
    const batchKeys = [...new Set(usable.map(({ event }) => event.data.keyId))].flatMap((id) => settings.get(id) ?? []);
    // One cap_reached per key and month of the spend, however many of its limits the batch reached.
    const capReached = new Map<string, { keyId: string; requestId: string }>();
    for (const { sum, after } of totals) {
      // A budget's limits are those of each of its keys that spent in the batch (rotated keys share one).
      for (const key of batchKeys.filter((k) => k.budget_id === sum.subject)) {
        const limit = limitOf(key, sum.period);
        if (limit === undefined) continue;
        await this.alert(trx, key, sum, limit, after);
        const id = `${key.id} ${sum.month}`;
        if (after.minus(sum.cost).lt(limit) && after.gte(limit) && !capReached.has(id)) capReached.set(id, { keyId: key.id, requestId: sum.requestId });
      }
    }
    for (const { keyId, requestId } of capReached.values()) {
      const { workspace_id: workspaceId } = settings.get(keyId)!;
      await this.deps.recordEvent(trx, KeyUpdatedSchema, { workspaceId, data: { keyId, workspaceId, change: 'cap_reached' }, requestId });
    }
    this.deps.notifier.afterCommit(
      trx,
      [...settings.keys()].map((keyId) => `key:${keyId}`),
    );
  }

  /** `billing.balance.changed` (a credit, a refund, a lost dispute: docs/api/billing.md#ledger): only its balance matters here. */
  async balanceChanged(trx: Knex.Transaction, event: ReceivedEvent<typeof BalanceChangedSchema>): Promise<void> {
    await this.balancesReported(trx, [event]);
  }

  /** The alerts of a key's limit of a period, its spend now `after`: each threshold reached, once per budget and period. */
  private async alert(trx: Knex.Transaction, key: BudgetSettingsRow, sum: PeriodSum, limit: string, after: Money): Promise<void> {
    // Alerts go to the key's alert webhook (docs/api/keys.md#spend-alerts): without one, none is spent; a limit of 0 has no percents.
    if (key.alert_webhook_url === null || !new Money(limit).gt(0)) return;
    const thresholds = key.alert_thresholds_pct ?? (key.alert_threshold_pct === null ? defaultThresholds : [key.alert_threshold_pct, 100]);
    const spendUsd = formatMoney(after);
    for (const pct of [...new Set(thresholds)].sort((a, b) => a - b)) {
      if (after.lt(new Money(limit).times(pct).div(100))) continue;
      const alert = { subject: sum.subject, period: sum.period, periodStart: sum.periodStart, thresholdPct: pct, keyId: key.id, spendUsd, capUsd: limit };
      if (!(await insertBudgetAlert(trx, alert))) continue;
      await this.deps.recordEvent(trx, SpendAlertSchema, {
        workspaceId: key.workspace_id,
        data: {
          keyId: key.id,
          workspaceId: key.workspace_id,
          month: monthLabel(sum.month),
          thresholdPct: pct,
          spendUsd,
          capUsd: limit,
          alertUrl: key.alert_webhook_url,
          period: sum.period,
          periodStart: sum.periodStart,
        },
        requestId: sum.requestId,
      });
    }
  }

  /**
   * Keeps the balance the events report, per workspace the newest of the batch (by billing's
   * version, then time); the stored one wins when it is newer still, whatever the arrival order.
   */
  private async balancesReported(trx: Knex.Transaction, events: BalanceEvent[]): Promise<void> {
    const newest = new Map<string, { balanceUsd: string; version: bigint; asOf: Date }>();
    for (const event of events) {
      const workspaceId = event.workspace_id || event.data.workspaceId;
      const { balanceUsd, balanceVersion } = event.data;
      if (!workspaceId || !plainDecimal.test(balanceUsd)) continue;
      const report = { balanceUsd, version: balanceVersion > 0n ? balanceVersion : 0n, asOf: new Date(event.occurred_at) };
      const known = newest.get(workspaceId);
      if (!known || report.version > known.version || (report.version === known.version && report.asOf >= known.asOf)) newest.set(workspaceId, report);
    }
    for (const [workspaceId, report] of newest) {
      if (await recordBalance(trx, workspaceId, { ...report, version: report.version.toString() })) {
        this.deps.notifier.afterCommit(trx, [`workspace:${workspaceId}`]);
      }
    }
  }
}

/** The key's limit of a period: its monthly cap, or one of its spend_limits rows. */
function limitOf(key: BudgetSettingsRow, period: Period): string | undefined {
  if (period === 'month') return key.monthly_spend_cap_usd ?? undefined;
  return key.limits.find((limit) => limit.period === period)?.amount_usd;
}
