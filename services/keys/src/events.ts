import {
  OrganizationDeletedSchema,
  OrganizationMemberRemovedSchema,
  TopupCompletedSchema,
  UsageRecordedSchema,
  UserDeactivatedSchema,
} from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { consumeEvents, onEvent } from '@switchboard/runtime/consumer';
import type { BackgroundTask, ServiceRuntime } from '@switchboard/runtime/service';
import type { Revocations } from './revocations.js';
import type { Spend } from './spend.js';

/**
 * The events the keys service consumes, one durable consumer each, each handler given the
 * decoded payload (docs/events.md). Each consumer is idempotent by event id.
 */
export function startEventConsumers(runtime: ServiceRuntime, handlers: { spend: Spend; revocations: Revocations }): BackgroundTask[] {
  const { spend, revocations } = handlers;
  // Usage is the busy subject: its effects commute (atomic additions, alerts and balances decided
  // by keys and timestamps), so several events are applied at once.
  return consumeEvents(runtime, [
    onEvent(UsageRecordedSchema, (event, trx) => spend.usageRecorded(trx, event), { concurrency: 4 }),
    onEvent(TopupCompletedSchema, (event, trx) => spend.topupCompleted(trx, event)),
    onEvent(UserDeactivatedSchema, (event, trx) => revocations.userDeactivated(trx, event)),
    onEvent(OrganizationMemberRemovedSchema, (event, trx) => revocations.memberRemoved(trx, event)),
    onEvent(OrganizationDeletedSchema, (event, trx) => revocations.organizationDeleted(trx, event)),
  ]);
}
