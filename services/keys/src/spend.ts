import type { EventEnvelopeJson } from '@switchboard/runtime/consumer';
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
 * Month-to-date spend and what follows from it (SPEC §4, §5), from billing's events. Each
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

/** A decimal field of an event, or undefined (logged by the caller) when it is not one. */
function decimalField(data: Record<string, unknown>, name: string): string | undefined {
  const value = data[name];
  return typeof value === 'string' && plainDecimal.test(value) ? value : undefined;
}

export class Spend {
  constructor(private readonly deps: SpendDeps) {}

  /** `billing.usage.recorded`. */
  async usageRecorded(trx: Knex.Transaction, event: EventEnvelopeJson): Promise<void> {
    const { data } = event;
    const keyId = typeof data.key_id === 'string' ? data.key_id : '';
    const cost = decimalField(data, 'cost_usd');
    const occurredAt = typeof data.occurred_at === 'string' ? new Date(data.occurred_at) : new Date(event.occurred_at);
    if (!keyId || cost === undefined || new Money(cost).isNegative() || Number.isNaN(occurredAt.getTime())) {
      this.deps.log.error({ event_id: event.event_id }, 'ignored a billing.usage.recorded event without a key, a cost or a time');
      return;
    }
    await this.balanceReported(trx, event, event.workspace_id || (data.workspace_id as string));
    const settings = await findAlertSettings(trx, keyId);
    if (!settings) {
      // A key of no workspace we know (another deployment's data plane, or a deleted test row).
      this.deps.log.warn({ event_id: event.event_id, key_id: keyId }, 'usage for an unknown key: not counted');
      return;
    }
    const month = monthOf(occurredAt);
    const after = new Money(await addSpend(trx, keyId, month, cost));
    const before = after.minus(cost);
    if (typeof data.reservation_id === 'string' && data.reservation_id) await settleReservation(trx, data.reservation_id, keyId);
    const cap = settings.monthly_spend_cap_usd;
    if (cap !== null && new Money(cap).gt(0)) {
      // Alerts go to the key's alert webhook (SPEC §4): without one, none is spent for the month.
      const thresholds = settings.alert_threshold_pct === null ? [] : [...new Set([settings.alert_threshold_pct, 100])].sort((a, b) => a - b);
      for (const pct of thresholds) {
        if (after.lt(new Money(cap).times(pct).div(100))) continue;
        const spendUsd = formatMoney(after);
        if (!(await insertSpendAlert(trx, { keyId, month, thresholdPct: pct, spendUsd, capUsd: cap }))) continue;
        await this.deps.recordEvent(trx, {
          type: 'key.spend_alert',
          workspaceId: settings.workspace_id,
          data: {
            key_id: keyId,
            workspace_id: settings.workspace_id,
            month: monthLabel(month),
            threshold_pct: pct,
            spend_usd: spendUsd,
            cap_usd: cap,
            alert_url: settings.alert_webhook_url ?? '',
          },
          requestId: event.request_id,
        });
      }
      if (before.lt(cap) && after.gte(cap)) {
        await this.deps.recordEvent(trx, {
          type: 'key.updated',
          workspaceId: settings.workspace_id,
          data: { key_id: keyId, workspace_id: settings.workspace_id, change: 'cap_reached' },
          requestId: event.request_id,
        });
      }
    }
    this.deps.notifier.afterCommit(trx, [`key:${keyId}`]);
  }

  /** `billing.topup.completed`: only its balance matters here. */
  async topupCompleted(trx: Knex.Transaction, event: EventEnvelopeJson): Promise<void> {
    await this.balanceReported(trx, event, event.workspace_id || (event.data.workspace_id as string));
  }

  /** Keeps the balance an event reports (the latest report wins, whatever the arrival order). */
  private async balanceReported(trx: Knex.Transaction, event: EventEnvelopeJson, workspaceId: string | undefined): Promise<void> {
    const balance = decimalField(event.data, 'balance_usd');
    if (!workspaceId || balance === undefined) return;
    const rawVersion = event.data.balance_version;
    const version = (typeof rawVersion === 'string' || typeof rawVersion === 'number') && /^\d{1,18}$/.test(String(rawVersion)) ? String(rawVersion) : '0';
    if (await recordBalance(trx, workspaceId, { balanceUsd: balance, version, asOf: new Date(event.occurred_at) })) {
      this.deps.notifier.afterCommit(trx, [`workspace:${workspaceId}`]);
    }
  }
}
