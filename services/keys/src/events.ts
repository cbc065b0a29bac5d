import {
  BalanceChangedSchema,
  OrganizationDeletedSchema,
  OrganizationMemberRemovedSchema,
  UsageRecordedSchema,
  UserDeactivatedSchema,
} from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { consumeEvents, type EventConsumerHost, onEvent, onEventBatch } from '@switchboard/runtime/consumer';
import type { BackgroundTask } from '@switchboard/runtime/service';
import type { Revocations } from './revocations.js';
import type { Spend } from './spend.js';

/**
 * The events the keys service consumes, one durable consumer each, each handler given the
 * decoded payload (docs/events.md). Each consumer is idempotent by event id.
 */
export function startEventConsumers(runtime: EventConsumerHost, handlers: { spend: Spend; revocations: Revocations }): BackgroundTask[] {
  const { spend, revocations } = handlers;
  // Usage is the busy subject: a backlog is applied a batch per transaction, one spend update per
  // key and month, however many usages it holds.
  return consumeEvents(runtime, [
    onEventBatch(UsageRecordedSchema, (events, trx) => spend.usageRecorded(trx, events)),
    onEvent(BalanceChangedSchema, (event, trx) => spend.balanceChanged(trx, event)),
    onEvent(UserDeactivatedSchema, (event, trx) => revocations.userDeactivated(trx, event)),
    onEvent(OrganizationMemberRemovedSchema, (event, trx) => revocations.memberRemoved(trx, event)),
    onEvent(OrganizationDeletedSchema, (event, trx) => revocations.organizationDeleted(trx, event)),
  ]);
}
