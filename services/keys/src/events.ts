import { type EventEnvelopeJson, startConsumer } from '@switchboard/runtime/consumer';
import type { Knex } from '@switchboard/runtime/db';
import type { BackgroundTask, ServiceRuntime } from '@switchboard/runtime/service';
import type { Revocations } from './revocations.js';
import type { Spend } from './spend.js';

/**
 * The events the keys service consumes, one durable consumer each (a consumer with several
 * subjects needs NATS 2.10; Debian ships 2.9). Each consumer is idempotent by event id.
 */
export function startEventConsumers(runtime: ServiceRuntime, handlers: { spend: Spend; revocations: Revocations }): BackgroundTask[] {
  const { spend, revocations } = handlers;
  // Usage is the busy subject: its effects commute (atomic additions, alerts and balances decided
  // by keys and timestamps), so several events are applied at once.
  const subscriptions: Array<[type: string, handle: (trx: Knex.Transaction, event: EventEnvelopeJson) => Promise<void>, concurrency?: number]> = [
    ['billing.usage.recorded', (trx, event) => spend.usageRecorded(trx, event), 4],
    ['billing.topup.completed', (trx, event) => spend.topupCompleted(trx, event)],
    ['user.deactivated', (trx, event) => revocations.userDeactivated(trx, event)],
    ['organization.member.removed', (trx, event) => revocations.memberRemoved(trx, event)],
    ['organization.deleted', (trx, event) => revocations.organizationDeleted(trx, event)],
  ];
  return subscriptions.map(([type, handle, concurrency]) =>
    startConsumer({
      db: runtime.db,
      nats: runtime.nats,
      stream: runtime.config.eventsStream,
      durable: `keys-${type.replaceAll('.', '-')}`,
      filterSubjects: [`${runtime.config.eventsSubjectPrefix}.${type}`],
      log: runtime.log,
      metrics: runtime.metrics,
      handle: (event, trx) => handle(trx, event),
      concurrency,
    }),
  );
}
