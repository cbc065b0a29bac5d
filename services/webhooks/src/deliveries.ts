import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import { WebhookTestSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { DeliverySchema, ListDeliveriesResponseSchema, RecoverDeliveriesResponseSchema } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import type { WorkspaceCaller as Caller } from '@switchboard/runtime/caller';
import { afterCommit, type Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument, retryLater } from '@switchboard/runtime/errors';
import { eventDataToJson, eventTypeOf } from '@switchboard/runtime/event-data';
import { newId } from '@switchboard/runtime/ids';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import { webhookNotFound } from './access.js';
import type { Endpoints } from './endpoints.js';
import { deliveryBody } from './intake.js';
import { toDelivery } from './records.js';
import {
  attemptsOf,
  type DeliveryRow,
  findDelivery,
  insertDelivery,
  insertEvent,
  listDeliveries,
  lockDelivery,
  queueManualAttempt,
  queueRecovery,
} from './store/deliveries.js';
import { type EndpointRow, lockEndpoint, logManualCall } from './store/endpoints.js';

/**
 * The deliveries of an endpoint as its workspace debugs them (docs/webhooks.md#deliveries-retries-and-their-schedule): the log with every
 * attempt, a test delivery, a manual redelivery (same webhook-id), and recovery of the failures
 * since a time. A manual attempt does not count against the retry schedule: if it fails, the
 * delivery goes on with the automatic retries it had left, or stays exhausted.
 */

export type DeliveryRecord = MessageInitShape<typeof DeliverySchema>;

export interface DeliveriesDeps {
  db: Knex;
  endpoints: Endpoints;
  /** Runs after a commit that queued deliveries (wakes the dispatcher of this process). */
  onQueued: () => void;
  /** Tests, redeliveries and recoveries one endpoint may have in a sliding minute (WEBHOOK_MANUAL_CALLS_PER_MINUTE). */
  manualCallsPerMinute: number;
}

const statuses = new Set(['pending', 'succeeded', 'failed', 'exhausted']);
const deliveryNotFound = () => apiError(Code.NotFound, 'delivery_not_found', 'No such delivery for this webhook.');
const endpointDisabled = () =>
  apiError(Code.FailedPrecondition, 'webhook_disabled', 'This webhook is disabled; enable it (PATCH enabled: true) before sending to it.', { httpStatus: 409 });

/**
 * Locks the endpoint until the transaction ends and refuses it when disabled or gone: a
 * concurrent `PATCH enabled: false` then either waits for this transaction or is seen by it,
 * so no manual attempt is queued to an endpoint disabled in between.
 */
async function lockEnabled(trx: Knex.Transaction, endpoint: EndpointRow): Promise<void> {
  const locked = await lockEndpoint(trx, endpoint.id, endpoint.workspace_id);
  if (!locked) throw webhookNotFound();
  if (!locked.enabled) throw endpointDisabled();
}

export class Deliveries {
  constructor(private readonly deps: DeliveriesDeps) {}

  /** A webhook.test delivery to this endpoint, due at once. */
  async test(caller: Caller, webhookId: string): Promise<DeliveryRecord> {
    const endpoint = await this.deps.endpoints.find(caller, webhookId, 'webhooks.manage');
    const eventId = newId('evt');
    const occurredAt = new Date().toISOString();
    const type = eventTypeOf(WebhookTestSchema);
    const data = eventDataToJson(WebhookTestSchema, {
      webhookId: endpoint.id,
      workspaceId: endpoint.workspace_id,
      message: 'This is a test delivery from Switchboard.',
    });
    const deliveryId = await this.deps.db.transaction(async (trx) => {
      await this.lockForManualCall(trx, endpoint);
      await insertEvent(trx, {
        id: eventId,
        type,
        workspaceId: endpoint.workspace_id,
        occurredAt,
        body: deliveryBody(eventId, type, occurredAt, data),
      });
      const id = await insertDelivery(trx, { endpointId: endpoint.id, eventId, eventType: type, trigger: 'test' });
      afterCommit(trx, this.deps.onQueued);
      return id;
    });
    return this.read(endpoint, deliveryId);
  }

  async list(
    caller: Caller,
    webhookId: string,
    input: { limit?: number; after?: string; status: string },
  ): Promise<MessageInitShape<typeof ListDeliveriesResponseSchema>> {
    const endpoint = await this.deps.endpoints.find(caller, webhookId, 'webhooks.read');
    const limit = parseLimit(input.limit);
    const after = decodeCursor(input.after);
    if (input.status && !statuses.has(input.status)) throw invalidArgument('status', 'status must be pending, succeeded, failed or exhausted.');
    const rows = await listDeliveries(this.deps.db, endpoint.id, input.status || undefined, { limit, after });
    const page = pageOf(rows, limit, (row) => ({ micros: row.cursor_micros, id: row.id }));
    const attempts = await attemptsOf(
      this.deps.db,
      page.rows.map((row) => row.id),
    );
    return { data: page.rows.map((row) => toDelivery(row, attempts.get(row.id) ?? [])), hasMore: page.hasMore, nextCursor: page.nextCursor };
  }

  async get(caller: Caller, webhookId: string, deliveryId: string): Promise<DeliveryRecord> {
    const endpoint = await this.deps.endpoints.find(caller, webhookId, 'webhooks.read');
    return this.read(endpoint, deliveryId);
  }

  /** One more attempt now, with the same webhook-id. */
  async redeliver(caller: Caller, webhookId: string, deliveryId: string): Promise<DeliveryRecord> {
    const endpoint = await this.deps.endpoints.find(caller, webhookId, 'webhooks.manage');
    const row = await this.deps.db.transaction(async (trx) => {
      // The endpoint first, as deleting it (which cascades to its deliveries) locks them.
      await this.lockForManualCall(trx, endpoint);
      const delivery = deliveryId ? await lockDelivery(trx, deliveryId, endpoint.id) : undefined;
      if (!delivery) throw deliveryNotFound();
      if (delivery.leased_until) {
        throw apiError(Code.FailedPrecondition, 'delivery_in_flight', 'This delivery is being sent right now; look at its attempts in a moment.', {
          httpStatus: 409,
        });
      }
      const queued = await queueManualAttempt(trx, delivery.id);
      afterCommit(trx, this.deps.onQueued);
      return queued;
    });
    return this.withAttempts(row);
  }

  /** A manual attempt of every failed or exhausted delivery created at or after `since`. */
  async recover(caller: Caller, webhookId: string, since: Date | undefined): Promise<MessageInitShape<typeof RecoverDeliveriesResponseSchema>> {
    const endpoint = await this.deps.endpoints.find(caller, webhookId, 'webhooks.manage');
    if (!since) throw invalidArgument('since', 'since is required: an RFC 3339 time.');
    if (since.getTime() > Date.now()) throw invalidArgument('since', 'since must not be in the future.');
    const requeued = await this.deps.db.transaction(async (trx) => {
      await this.lockForManualCall(trx, endpoint);
      const count = await queueRecovery(trx, endpoint.id, since);
      if (count > 0) afterCommit(trx, this.deps.onQueued);
      return count;
    });
    return { since: timestampFromDate(since), requeued };
  }

  /**
   * Locks the endpoint as lockEnabled does and counts this manual call in its sliding minute, or
   * refuses it (429 with Retry-After) once the minute holds the limit: the budget is shared by
   * test, redeliver and recover, and counted on the endpoint's row, so every replica sees it. A
   * call refused later in its transaction (404, 409) rolls its count back with it.
   */
  private async lockForManualCall(trx: Knex.Transaction, endpoint: EndpointRow): Promise<void> {
    await lockEnabled(trx, endpoint);
    const limit = this.deps.manualCallsPerMinute;
    const { retryInMs } = await logManualCall(trx, endpoint.id, limit);
    if (retryInMs > 0) {
      const seconds = Math.max(1, Math.ceil(retryInMs / 1000));
      throw retryLater(
        'rate_limited',
        `This endpoint had ${limit} tests, redeliveries and recoveries in the last minute, as many as it may; try again in ${seconds} seconds.`,
        seconds,
      );
    }
  }

  private async read(endpoint: EndpointRow, deliveryId: string): Promise<DeliveryRecord> {
    const row = deliveryId ? await findDelivery(this.deps.db, deliveryId, endpoint.id) : undefined;
    if (!row) throw deliveryNotFound();
    return this.withAttempts(row);
  }

  private async withAttempts(row: DeliveryRow): Promise<DeliveryRecord> {
    const attempts = await attemptsOf(this.deps.db, [row.id]);
    return toDelivery(row, attempts.get(row.id) ?? []);
  }
}
