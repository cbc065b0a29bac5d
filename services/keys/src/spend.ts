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
import { recordBalance } from './store/balances.js';
import { settleLeases } from './store/cap-leases.js';
import { settleReservations } from './store/reservations.js';
import { type AlertSettingsRow, addSpends, findAlertSettings, insertSpendAlert } from './store/spend.js';

/**
 * Month-to-date spend and what follows from it (docs/api/keys.md#monthly-spend, docs/api/billing.md#usage-ingestion), from billing's events, a
 * batch at a time. Each handler runs inside the consumer's transaction, which also records the
 * event ids, so a redelivered event changes nothing (runtime/consumer.ts). Per batch of usage:
 *  - the costs are added to each key's spend of the UTC month each usage occurred in, one row
 *    update per key and month;
 *  - reservations named are settled, and the cost of each usage that names a cap lease is added
 *    to the lease's settled part, so its room moves from the lease to the spend at once;
 *  - alerts, for a key with an alert webhook: when the spend first reaches threshold_pct of the
 *    cap and when it reaches the cap itself, a `key.spend_alert` event, once per key, month and
 *    threshold (the primary key of spend_alerts decides "once", also across replicas);
 *  - reaching the cap also emits `key.updated` (change cap_reached), so gateways drop their
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

type UsageEvent = ReceivedEvent<typeof UsageRecordedSchema>;
type BalanceEvent = ReceivedEvent<typeof UsageRecordedSchema | typeof BalanceChangedSchema>;

/** The usage of one key in one month within a batch. */
interface KeyMonth {
  keyId: string;
  month: string;
  cost: Money;
  count: number;
  /** The request of the batch's last usage of the key and month, for the events it causes. */
  requestId: string;
}

export class Spend {
  constructor(private readonly deps: SpendDeps) {}

  /** `billing.usage.recorded`, a batch of events not seen before. */
  async usageRecorded(trx: Knex.Transaction, events: UsageEvent[]): Promise<void> {
    const usable: Array<{ event: UsageEvent; month: string }> = [];
    for (const event of events) {
      const { keyId, costUsd } = event.data;
      const occurredAt = event.data.occurredAt ? timestampDate(event.data.occurredAt) : new Date(event.occurred_at);
      if (!keyId || !plainDecimal.test(costUsd) || new Money(costUsd).isNegative() || Number.isNaN(occurredAt.getTime())) {
        this.deps.log.error({ event_id: event.event_id }, 'ignored a billing.usage.recorded event without a key, a cost or a time');
        continue;
      }
      usable.push({ event, month: monthOf(occurredAt) });
    }
    await this.balancesReported(
      trx,
      usable.map(({ event }) => event),
    );
    const settings = new Map((await findAlertSettings(trx, [...new Set(usable.map(({ event }) => event.data.keyId))])).map((row) => [row.id, row]));
    const byKeyMonth = new Map<string, KeyMonth>();
    const leaseCosts = new Map<string, { leaseId: string; keyId: string; cost: Money }>();
    const reservations: Array<{ reservationId: string; keyId: string }> = [];
    for (const { event, month } of usable) {
      const { keyId, costUsd, reservationId, capLeaseId } = event.data;
      if (!settings.has(keyId)) {
        // A key of no workspace we know (another deployment's data plane, or a deleted test row).
        this.deps.log.warn({ event_id: event.event_id, key_id: keyId }, 'usage for an unknown key: not counted');
        continue;
      }
      const id = `${keyId} ${month}`;
      const sum = byKeyMonth.get(id) ?? { keyId, month, cost: new Money(0), count: 0, requestId: '' };
      byKeyMonth.set(id, { ...sum, cost: sum.cost.plus(costUsd), count: sum.count + 1, requestId: event.request_id });
      if (reservationId) reservations.push({ reservationId, keyId });
      if (capLeaseId) {
        const lease = leaseCosts.get(`${capLeaseId} ${keyId}`) ?? { leaseId: capLeaseId, keyId, cost: new Money(0) };
        leaseCosts.set(`${capLeaseId} ${keyId}`, { ...lease, cost: lease.cost.plus(costUsd) });
      }
    }
    if (byKeyMonth.size === 0) return;
    const sums = [...byKeyMonth.values()];
    const totals = await addSpends(
      trx,
      sums.map((sum) => ({ keyId: sum.keyId, month: sum.month, costUsd: formatMoney(sum.cost), count: sum.count })),
    );
    await settleReservations(trx, reservations);
    await settleLeases(
      trx,
      [...leaseCosts.values()].map((lease) => ({ leaseId: lease.leaseId, keyId: lease.keyId, costUsd: formatMoney(lease.cost) })),
    );
    for (const total of totals) {
      const sum = byKeyMonth.get(`${total.key_id} ${total.month}`)!;
      const after = new Money(total.spend_usd);
      await this.capCrossed(trx, settings.get(sum.keyId)!, sum, after.minus(sum.cost), after);
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

  /** The alerts and the cap_reached of a key's spend going from `before` to `after` in a month. */
  private async capCrossed(trx: Knex.Transaction, settings: AlertSettingsRow, sum: KeyMonth, before: Money, after: Money): Promise<void> {
    const cap = settings.monthly_spend_cap_usd;
    if (cap === null || !new Money(cap).gt(0)) return;
    const { keyId, month, requestId } = sum;
    // Alerts go to the key's alert webhook (docs/api/keys.md#spend-alerts): without one, none is spent for the month.
    const thresholds = settings.alert_threshold_pct === null ? [] : [...new Set([settings.alert_threshold_pct, 100])].sort((a, b) => a - b);
    for (const pct of thresholds) {
      if (after.lt(new Money(cap).times(pct).div(100))) continue;
      const spendUsd = formatMoney(after);
      if (!(await insertSpendAlert(trx, { keyId, month, thresholdPct: pct, spendUsd, capUsd: cap }))) continue;
      await this.deps.recordEvent(trx, SpendAlertSchema, {
        workspaceId: settings.workspace_id,
        data: {
          keyId,
          workspaceId: settings.workspace_id,
          month: monthLabel(month),
          thresholdPct: pct,
          spendUsd,
          capUsd: cap,
          alertUrl: settings.alert_webhook_url ?? '',
        },
        requestId,
      });
    }
    if (before.lt(cap) && after.gte(cap)) {
      await this.deps.recordEvent(trx, KeyUpdatedSchema, {
        workspaceId: settings.workspace_id,
        data: { keyId, workspaceId: settings.workspace_id, change: 'cap_reached' },
        requestId,
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
