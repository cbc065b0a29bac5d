import { AgentCompletedSchema, OrganizationDeletedSchema, SpendAlertSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { consumeEvents, onEvent, onEventPassedThrough } from '@switchboard/runtime/consumer';
import type { BackgroundTask, ServiceRuntime } from '@switchboard/runtime/service';
import { fannedOutSchemas } from './event-types.js';
import { type Intake, parseAgentCompleted } from './intake.js';

/**
 * The events the webhooks service consumes, one durable consumer each (docs/events.md). Fan-out commutes (delivery rows are unique per endpoint and
 * event), so several batches are taken at once, each in one transaction of a few statements.
 */
export function startEventConsumers(runtime: ServiceRuntime, intake: Intake): BackgroundTask[] {
  return consumeEvents(runtime, [
    ...fannedOutSchemas.map((schema) =>
      // Fan-out delivers the data as it arrived: it is not decoded, so no shape can drop a delivery.
      onEventPassedThrough(schema, (events, trx) => intake.fanOut(trx, events), {
        concurrency: 4,
        maxBatch: 100,
        // An agent runtime may publish agent.completed to the subject itself (docs/api/internal-calls.md#publishevent).
        parse: schema === AgentCompletedSchema ? parseAgentCompleted : undefined,
        // PublishEvent fans its events out in the transaction of their outbox row.
        skip: schema === AgentCompletedSchema ? (event) => event.producer === 'webhooks' : undefined,
      }),
    ),
    onEvent(SpendAlertSchema, (event, trx) => intake.spendAlert(trx, event), { concurrency: 4 }),
    onEvent(OrganizationDeletedSchema, (event, trx) => intake.organizationDeleted(trx, event)),
  ]);
}
