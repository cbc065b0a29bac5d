import { timestampDate } from '@bufbuild/protobuf/wkt';
import {
  KeyUpdatedSchema,
  SpendAlertSchema,
  type TopupCompletedSchema,
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
import { settleReservation } from './store/reservations.js';
import { addSpend, findAlertSettings, insertSpendAlert } from './store/spend.js';

/**
 * Month-to-date spend and what follows from it (docs/api/keys.md#monthly-spend, docs/api/billing.md#usage-ingestion), from billing's events. Each
 * handler runs inside the consumer's transaction, which also records the event id, so a
 * redelivered event changes nothing (runtime/consumer.ts). Per usage:
 *  - its cost is added to the key's spend of the UTC month the usage occurred in;
 *  - its reservation, if any, is settled;
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

export class Spend {
  constructor(private readonly deps: SpendDeps) {}

  /** `billing.usage.recorded`. */
  async usageRecorded(trx: Knex.Transaction, event: ReceivedEvent<typeof UsageRecordedSchema>): Promise<void> {
    const { data } = event;
    const keyId = data.keyId;
    const cost = data.costUsd;
    const occurredAt = data.occurredAt ? timestampDate(data.occurredAt) : new Date(event.occurred_at);
    if (!keyId || !plainDecimal.test(cost) || new Money(cost).isNegative() || Number.isNaN(occurredAt.getTime())) {
      this.deps.log.error({ event_id: event.event_id }, 'ignored a billing.usage.recorded event without a key, a cost or a time');
      return;
    }
    await this.balanceReported(trx, event, event.workspace_id || data.workspaceId);
    const settings = await findAlertSettings(trx, keyId);
    if (!settings) {
      // A key of no workspace we know (another deployment's data plane, or a deleted test row).
      this.deps.log.warn({ event_id: event.event_id, key_id: keyId }, 'usage for an unknown key: not counted');
      return;
    }
    const month = monthOf(occurredAt);
    const after = new Money(await addSpend(trx, keyId, month, cost));
    const before = after.minus(cost);
    if (data.reservationId) await settleReservation(trx, data.reservationId, keyId);
    const cap = settings.monthly_spend_cap_usd;
    if (cap !== null && new Money(cap).gt(0)) {
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
          requestId: event.request_id,
        });
      }
      if (before.lt(cap) && after.gte(cap)) {
        await this.deps.recordEvent(trx, KeyUpdatedSchema, {
          workspaceId: settings.workspace_id,
          data: { keyId, workspaceId: settings.workspace_id, change: 'cap_reached' },
          requestId: event.request_id,
        });
      }
    }
    this.deps.notifier.afterCommit(trx, [`key:${keyId}`]);
  }

  /** `billing.topup.completed`: only its balance matters here. */
  async topupCompleted(trx: Knex.Transaction, event: ReceivedEvent<typeof TopupCompletedSchema>): Promise<void> {
    await this.balanceReported(trx, event, event.workspace_id || event.data.workspaceId);
  }

  /** Keeps the balance an event reports (the latest report wins, whatever the arrival order). */
  private async balanceReported(
    trx: Knex.Transaction,
    event: ReceivedEvent<typeof UsageRecordedSchema | typeof TopupCompletedSchema>,
    workspaceId: string,
  ): Promise<void> {
    const { balanceUsd, balanceVersion } = event.data;
    if (!workspaceId || !plainDecimal.test(balanceUsd)) return;
    const version = balanceVersion > 0n ? balanceVersion.toString() : '0';
    if (await recordBalance(trx, workspaceId, { balanceUsd, version, asOf: new Date(event.occurred_at) })) {
      this.deps.notifier.afterCommit(trx, [`workspace:${workspaceId}`]);
    }
  }
}
