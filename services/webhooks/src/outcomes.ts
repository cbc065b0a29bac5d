import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  WebhookDeliveryExhaustedSchema,
  WebhookEndpointDisabledSchema,
  WebhookEndpointRecoveredSchema,
  WebhookTestSchema,
} from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { Knex } from '@switchboard/runtime/db';
import { eventTypeOf } from '@switchboard/runtime/event-data';
import { GroupCommit } from '@switchboard/runtime/group-commit';
import type { Logger } from '@switchboard/runtime/log';
import type { RecordEventInput } from '@switchboard/runtime/outbox';
import type { EventsWriter, EventWriter } from '@switchboard/runtime/service';
import type { RetrySchedule } from './retry-schedule.js';
import type { DeliveryResult } from './sender.js';
import { type ClaimedDelivery, type DeliveryRow, finishAttempts, insertAttempts, lockDeliveries } from './store/deliveries.js';
import { clearFailureClocks, type EndpointRow, lockEndpoints, recordEndpointFailure } from './store/endpoints.js';

/**
 * What attempts lead to, committed: each attempt's record, its delivery's next state and its
 * endpoint's failure clock. The outcomes that finish while a commit runs go together in the next
 * one, so a busy dispatcher pays one transaction per batch rather than per attempt; an attempt's
 * slot is given back only once its outcome is committed.
 */

export interface Outcome {
  claim: ClaimedDelivery;
  /** Where the attempt went (a key alert's URL is looked up at send time). */
  url: string;
  result: DeliveryResult;
}

export interface OutcomesDeps {
  db: Knex;
  log: Logger;
  schedule: RetrySchedule;
  recordEvent: EventWriter;
  /** The operational events of a batch, one statement per type. */
  recordEvents: EventsWriter;
  /** How long an endpoint may fail without a success before it is disabled. */
  disableAfterMs: number;
  /** After a commit that scheduled retries: the soonest one, in milliseconds. */
  onRetryScheduled(inMs: number): void;
}

/** A run of failures at least this long ends with `webhook.endpoint.recovered` (docs/webhooks.md#event-types). */
export const recoveredAfterMs = 3_600_000;
const exhaustedType = eventTypeOf(WebhookDeliveryExhaustedSchema);
/** A test goes to the endpoint tested only, and so does what becomes of it. */
const testType = eventTypeOf(WebhookTestSchema);

export class Outcomes {
  private readonly batches: GroupCommit<Outcome, undefined>;

  constructor(private readonly deps: OutcomesDeps) {
    this.batches = new GroupCommit({
      name: 'webhook outcomes',
      log: deps.log,
      maxBatch: 200,
      commit: async (outcomes) => {
        await this.commit(outcomes);
        return outcomes.map(() => undefined);
      },
    });
  }

  /** Resolves once the outcome is committed; rejects when its transaction failed (the lease then runs out and the delivery is sent again). */
  record(outcome: Outcome): Promise<void> {
    return this.batches.submit(outcome);
  }

  private async commit(outcomes: Outcome[]): Promise<void> {
    const { db, schedule, disableAfterMs, log } = this.deps;
    const disabled: EndpointRow[] = [];
    let soonestRetry: number | undefined;
    await db.transaction(async (trx) => {
      // Endpoints before deliveries, in id order: the order of a delete (its cascade), so the two never deadlock.
      const endpointIds = [...new Set(outcomes.filter((o) => o.claim.kind === 'webhook').map((o) => o.claim.endpoint_id))].sort();
      const workspaces = await lockEndpoints(trx, endpointIds);
      const locked = new Map((await lockDeliveries(trx, [...new Set(outcomes.map((o) => o.claim.id))])).map((row) => [row.id, row]));
      const mine = outcomes.filter((o) => locked.has(o.claim.id)); // the others were deleted with their endpoint
      await insertAttempts(
        trx,
        mine.map(({ claim, url, result }) => ({
          delivery_id: claim.id,
          url,
          status: result.ok ? 'success' : 'failed',
          response_status_code: result.statusCode,
          error_class: result.errorClass,
          duration_ms: Math.round(result.durationMs),
          response_body: result.responseBody,
          trigger: claim.next_trigger,
        })),
      );
      // An attempt whose lease ran out is recorded, but the delivery's state is its new holder's.
      const leased = mine.filter((o) => locked.get(o.claim.id)?.lease_token === o.claim.lease_token);
      const updates = leased.map(({ claim, result }) => {
        const next = nextState(locked.get(claim.id)!, claim, result, schedule);
        if (next.retryInMs !== undefined) soonestRetry = Math.min(soonestRetry ?? next.retryInMs, next.retryInMs);
        return {
          id: claim.id,
          status: next.status,
          scheduledAttempts: next.scheduledAttempts,
          nextAttemptAt: next.retryInMs === undefined ? null : new Date(Date.now() + next.retryInMs),
          succeeded: result.ok,
        };
      });
      await finishAttempts(trx, updates);
      await this.deps.recordEvents(trx, WebhookDeliveryExhaustedSchema, exhaustedEvents(leased, updates, locked, workspaces));
      // Any success of the batch stops an endpoint's failure clock (failures after the last one
      // start it again); any 410 disables it.
      const byEndpoint = new Map<string, Outcome[]>();
      for (const outcome of mine)
        if (outcome.claim.kind === 'webhook') {
          const attempts = byEndpoint.get(outcome.claim.endpoint_id) ?? [];
          attempts.push(outcome);
          byEndpoint.set(outcome.claim.endpoint_id, attempts);
        }
      const cleared = await clearFailureClocks(
        trx,
        endpointIds.filter((id) => byEndpoint.get(id)?.some((o) => o.result.ok)),
      );
      // Not for an endpoint disabled meanwhile (this attempt was in flight then): it had its
      // webhook.endpoint.disabled, and enabling it clears the clock.
      const recovered = cleared.filter((c) => c.enabled && c.cleared_at.getTime() - c.failing_since.getTime() >= recoveredAfterMs);
      await this.deps.recordEvents(
        trx,
        WebhookEndpointRecoveredSchema,
        recovered.map((c) => ({
          workspaceId: c.workspace_id,
          data: {
            webhookId: c.id,
            workspaceId: c.workspace_id,
            url: c.url,
            failingSince: timestampFromDate(c.failing_since),
            recoveredAt: timestampFromDate(c.cleared_at),
          },
        })),
      );
      for (const endpointId of endpointIds) {
        const attempts = byEndpoint.get(endpointId) ?? [];
        const gone = attempts.some((o) => o.result.statusCode === 410);
        const lastSuccess = attempts.findLastIndex((o) => o.result.ok);
        if (!gone && lastSuccess === attempts.length - 1) continue;
        const endpoint = await recordEndpointFailure(trx, endpointId, { gone, disableAfterMs });
        if (!endpoint) continue;
        disabled.push(endpoint);
        await this.deps.recordEvent(trx, WebhookEndpointDisabledSchema, {
          workspaceId: endpoint.workspace_id,
          data: {
            webhookId: endpoint.id,
            workspaceId: endpoint.workspace_id,
            url: endpoint.url,
            reason: endpoint.disabled_reason ?? '',
            disabledAt: endpoint.disabled_at ? timestampFromDate(endpoint.disabled_at) : undefined,
            failingSince: endpoint.failing_since ? timestampFromDate(endpoint.failing_since) : undefined,
          },
        });
      }
    });
    for (const endpoint of disabled)
      log.warn({ webhook_id: endpoint.id, workspace_id: endpoint.workspace_id, reason: endpoint.disabled_reason }, 'webhook endpoint disabled');
    if (soonestRetry !== undefined) this.deps.onRetryScheduled(soonestRetry);
  }
}

/**
 * `webhook.delivery.exhausted` for each delivery a scheduled attempt of this batch exhausted
 * (docs/webhooks.md#event-types). None for a manual attempt (a redelivery or recovery by hand
 * leaves or puts the delivery back in `exhausted`: the caller sees it), for a key alert (not a
 * workspace endpoint: its URL belongs to a key), nor for a delivery of this type itself, so two
 * failing endpoints never notify each other for ever.
 */
function exhaustedEvents(
  leased: Outcome[],
  updates: Array<{ id: string; status: DeliveryRow['status'] }>,
  locked: Map<string, { event_id: string }>,
  workspaces: Map<string, string>,
): RecordEventInput<typeof WebhookDeliveryExhaustedSchema>[] {
  const exhaustedAt = timestampFromDate(new Date());
  return leased.flatMap(({ claim }, i) => {
    const workspaceId = workspaces.get(claim.endpoint_id);
    if (
      updates[i].status !== 'exhausted' ||
      claim.kind !== 'webhook' ||
      claim.next_trigger === 'manual' ||
      claim.event_type === exhaustedType ||
      claim.event_type === testType ||
      !workspaceId
    ) {
      return [];
    }
    return [
      {
        workspaceId,
        data: {
          webhookId: claim.endpoint_id,
          workspaceId,
          deliveryId: claim.id,
          eventId: locked.get(claim.id)?.event_id ?? '',
          eventType: claim.event_type,
          exhaustedAt,
        },
      },
    ];
  });
}

/**
 * The delivery after an attempt. Scheduled attempts (event, test, retry) count against the
 * schedule: N delays allow N + 1. A manual attempt does not: when it fails, the delivery goes on
 * with the retries it had left, or is exhausted; one that had succeeded already stays
 * `succeeded` (the event did reach the receiver) and starts no retries, since its earlier
 * success left its whole schedule unused.
 */
export function nextState(
  row: Pick<DeliveryRow, 'status' | 'scheduled_attempts'>,
  claim: Pick<ClaimedDelivery, 'next_trigger'>,
  result: Pick<DeliveryResult, 'ok' | 'retryAfterMs'>,
  schedule: RetrySchedule,
): { status: DeliveryRow['status']; scheduledAttempts: number; retryInMs?: number } {
  const manual = claim.next_trigger === 'manual';
  const scheduledAttempts = row.scheduled_attempts + (manual ? 0 : 1);
  if (result.ok || (manual && row.status === 'succeeded')) return { status: 'succeeded', scheduledAttempts };
  const retryInMs = schedule.delayAfter(Math.max(scheduledAttempts, 1), result.retryAfterMs);
  return retryInMs === undefined ? { status: 'exhausted', scheduledAttempts } : { status: 'failed', scheduledAttempts, retryInMs };
}
