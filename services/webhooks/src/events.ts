import { type EventEnvelopeJson, startConsumer } from '@switchboard/runtime/consumer';
import type { Knex } from '@switchboard/runtime/db';
import type { BackgroundTask, ServiceRuntime } from '@switchboard/runtime/service';
import { fannedOutTypes } from './event-types.js';
import { type Intake, parseAgentCompleted } from './intake.js';

/**
 * The events the webhooks service consumes, one durable consumer each (a consumer with several
 * subjects needs NATS 2.10; Debian ships 2.9). Fan-out commutes (delivery rows are unique per
 * endpoint and event), so several events are taken at once.
 */
export function startEventConsumers(runtime: ServiceRuntime, intake: Intake): BackgroundTask[] {
  const subscriptions: Array<{ type: string; handle: (trx: Knex.Transaction, event: EventEnvelopeJson) => Promise<void>; concurrency: number }> = [
    ...fannedOutTypes.map((type) => ({ type, handle: (trx: Knex.Transaction, event: EventEnvelopeJson) => intake.fanOut(trx, event), concurrency: 8 })),
    { type: 'key.spend_alert', handle: (trx, event) => intake.spendAlert(trx, event), concurrency: 4 },
    { type: 'organization.deleted', handle: (trx, event) => intake.organizationDeleted(trx, event), concurrency: 1 },
  ];
  return subscriptions.map(({ type, handle, concurrency }) =>
    startConsumer({
      db: runtime.db,
      nats: runtime.nats,
      stream: runtime.config.eventsStream,
      durable: `webhooks-${type.replaceAll('.', '-')}`,
      filterSubjects: [`${runtime.config.eventsSubjectPrefix}.${type}`],
      log: runtime.log,
      metrics: runtime.metrics,
      // An agent runtime may publish agent.completed to the subject itself (SPEC §8).
      parse: type === 'agent.completed' ? parseAgentCompleted : undefined,
      // PublishEvent fans its events out in the transaction of their outbox row.
      skip: type === 'agent.completed' ? (event) => event.producer === 'webhooks' : undefined,
      handle: (event, trx) => handle(trx, event),
      concurrency,
    }),
  );
}
