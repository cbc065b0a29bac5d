import { createHash } from 'node:crypto';
import type { JsonObject } from '@bufbuild/protobuf';
import { AgentCompletedSchema, type OrganizationDeletedSchema, type SpendAlertSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { type EventEnvelopeJson, type JsMsg, type PassedThroughEvent, parseEventEnvelope, type ReceivedEvent } from '@switchboard/runtime/consumer';
import { afterCommit, type Knex } from '@switchboard/runtime/db';
import { invalidArgument } from '@switchboard/runtime/errors';
import { eventTypeOf } from '@switchboard/runtime/event-data';
import { GroupCommit } from '@switchboard/runtime/group-commit';
import { newId } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import type { EventsWriter } from '@switchboard/runtime/service';
import { endpointAbout } from './event-types.js';
import { fanOut, insertDelivery, insertEvent, insertEvents } from './store/deliveries.js';
import { disableWorkspaceEndpoints, upsertAlertTarget } from './store/endpoints.js';
import { claimIdempotencyKeys, pruneIdempotencyKeys } from './store/published-events.js';

/**
 * Where deliveries come from: events of the stream fanned out to the subscribed endpoints of
 * their workspace, spend alerts to a key's alert URL, and `agent.completed` published through
 * PublishEvent. Each runs in the transaction that records the event as processed, so the
 * JetStream message is acknowledged only once its delivery rows are committed.
 */

export interface IntakeDeps {
  db: Knex;
  log: Logger;
  recordEvents: EventsWriter;
  /** Runs after a commit that queued deliveries (wakes the dispatcher of this process). */
  onQueued: () => void;
}

/** A published agent.completed payload is delivered as is; a bound keeps events well inside NATS's limits. */
export const maxPublishedDataBytes = 64 * 1024;
const workspaceIdPattern = /^org_[A-Za-z0-9]{1,64}$/;
const idempotencyKeyPattern = /^[\x20-\x7e]{1,255}$/;
const idempotencyKeyTtlMs = 24 * 3600 * 1000;
const agentCompleted = eventTypeOf(AgentCompletedSchema);

/** What a fan-out reads of an event: its data as it arrived is delivered unchanged. */
type FannedOutEvent = Pick<PassedThroughEvent, 'event_id' | 'type' | 'workspace_id' | 'occurred_at' | 'json'>;

/**
 * The body every endpoint receives (docs/webhooks.md#event-types), the same bytes on every attempt;
 * `id` is the event's, so a receiver can tell two deliveries of one event apart from two events.
 */
export function deliveryBody(id: string, type: string, occurredAt: string, data: JsonObject): string {
  return JSON.stringify({ id, type, timestamp: occurredAt, data });
}

/** One PublishEvent call, validated, waiting for its batch. */
interface Publish {
  workspaceId: string;
  data: JsonObject;
  key?: string;
}

export class Intake {
  private readonly publishes: GroupCommit<Publish, string>;

  constructor(private readonly deps: IntakeDeps) {
    // Batches commute (their keys are claimed in one order, their rows are new), so two run at once.
    this.publishes = new GroupCommit({
      name: 'published events',
      log: deps.log,
      maxBatch: 200,
      concurrency: 2,
      commit: (publishes) => this.commitPublishes(publishes),
    });
  }

  /** Events for every subscribed endpoint of their workspace, once per event id, in a few statements for the whole batch. */
  async fanOut(trx: Knex.Transaction, events: FannedOutEvent[]): Promise<void> {
    const bodies = events
      .filter((event) => event.workspace_id)
      .map((event) => ({
        id: event.event_id,
        type: event.type,
        workspaceId: event.workspace_id,
        occurredAt: event.occurred_at,
        body: deliveryBody(event.event_id, event.type, event.occurred_at, event.json),
        excludedEndpointId: endpointAbout(event.type, event.json),
      }));
    const stored = await insertEvents(trx, bodies);
    const queued = await fanOut(
      trx,
      bodies.filter((event) => stored.has(event.id)),
    );
    if (queued > 0) afterCommit(trx, this.deps.onQueued);
  }

  /**
   * key.spend_alert goes to the key's alert URL only (not to the workspace's endpoints), signed
   * with the key's own secret, which is looked up when it is sent; the URL is not part of the data.
   */
  async spendAlert(trx: Knex.Transaction, event: ReceivedEvent<typeof SpendAlertSchema>): Promise<void> {
    const { alertUrl, keyId } = event.data;
    const { alert_url: _target, ...data } = event.json;
    if (!alertUrl || !keyId || !event.workspace_id) {
      this.deps.log.warn({ event_id: event.event_id }, 'key.spend_alert without a key or an alert URL: dropped');
      return;
    }
    const stored = await insertEvent(trx, {
      id: event.event_id,
      type: event.type,
      workspaceId: event.workspace_id,
      occurredAt: event.occurred_at,
      body: deliveryBody(event.event_id, event.type, event.occurred_at, data),
    });
    if (!stored) return;
    await upsertAlertTarget(trx, { keyId, workspaceId: event.workspace_id, url: alertUrl });
    await insertDelivery(trx, { endpointId: keyId, eventId: event.event_id, eventType: event.type, trigger: 'event' });
    afterCommit(trx, this.deps.onQueued);
  }

  /** An organization that is gone keeps no live endpoint. */
  async organizationDeleted(trx: Knex.Transaction, event: ReceivedEvent<typeof OrganizationDeletedSchema>): Promise<void> {
    const orgId = event.data.orgId || event.workspace_id;
    if (!orgId) return;
    const disabled = await disableWorkspaceEndpoints(trx, orgId, 'organization_deleted');
    if (disabled > 0) this.deps.log.info({ workspace_id: orgId, disabled }, 'organization deleted: its webhooks are disabled');
  }

  /**
   * PublishEvent: an agent.completed for the workspace's endpoints. The delivery rows are written
   * with the outbox event in one transaction, so a delivery never waits for NATS; the event still
   * goes to the stream for other consumers (and the fan-out of its copy finds it stored).
   */
  async publish(input: { workspaceId: string; type: string; data: JsonObject | undefined; idempotencyKey?: string }): Promise<string> {
    if (!workspaceIdPattern.test(input.workspaceId)) throw invalidArgument('workspace_id', 'workspace_id must be an organization id (org_…).');
    if (input.type !== agentCompleted) {
      throw invalidArgument('type', 'Only agent.completed is published through PublishEvent; the other event types come from the services themselves.');
    }
    const data = input.data ?? {};
    const json = JSON.stringify(data);
    if (Buffer.byteLength(json) > maxPublishedDataBytes) {
      throw invalidArgument('data', `data may be at most ${maxPublishedDataBytes} bytes of compact JSON.`);
    }
    // The event travels through the outbox as jsonb, which cannot hold U+0000 (in a key or a value).
    if (json.includes('\\u0000')) throw invalidArgument('data', 'data must not contain a NUL character.');
    const key = input.idempotencyKey;
    if (key !== undefined && !idempotencyKeyPattern.test(key)) {
      throw invalidArgument('idempotency_key', 'idempotency_key must be 1 to 255 printable ASCII characters.');
    }
    return this.publishes.submit({ workspaceId: input.workspaceId, data, key });
  }

  /**
   * The PublishEvent calls that arrived while the last batch committed, in one transaction: their
   * idempotency keys, outbox rows, stored bodies and delivery rows, a few statements for the whole
   * batch. A retry (a key used before, or twice in the batch) answers the first event's id and
   * writes nothing, its outbox row included.
   */
  private async commitPublishes(publishes: Publish[]): Promise<string[]> {
    return this.deps.db.transaction(async (trx) => {
      const eventIds = publishes.map(() => newId('evt'));
      // A key twice in one batch: the later calls are retries of the first.
      const firstWithKey = new Map<string, number>();
      const sameAs = publishes.map((publish, i) => {
        if (publish.key === undefined) return i;
        const name = `${publish.workspaceId}\n${publish.key}`;
        const first = firstWithKey.get(name) ?? i;
        firstWithKey.set(name, first);
        return first;
      });
      const keyed = [...firstWithKey.values()];
      const earlier = await claimIdempotencyKeys(
        trx,
        keyed.map((i) => ({ workspaceId: publishes[i].workspaceId, key: publishes[i].key!, eventId: eventIds[i] })),
      );
      const retried = new Set<number>();
      for (const [position, eventId] of earlier) {
        eventIds[keyed[position]] = eventId;
        retried.add(keyed[position]);
      }
      const fresh = publishes.map((_, i) => i).filter((i) => sameAs[i] === i && !retried.has(i));
      await this.deps.recordEvents(
        trx,
        AgentCompletedSchema,
        fresh.map((i) => ({ workspaceId: publishes[i].workspaceId, data: publishes[i].data, eventId: eventIds[i] })),
      );
      const occurredAt = new Date().toISOString();
      await this.fanOut(
        trx,
        fresh.map((i) => ({
          event_id: eventIds[i],
          type: agentCompleted,
          workspace_id: publishes[i].workspaceId,
          occurred_at: occurredAt,
          json: publishes[i].data,
        })),
      );
      return publishes.map((_, i) => eventIds[sameAs[i]]);
    });
  }

  /** Forgets PublishEvent idempotency keys after a day. */
  async pruneIdempotencyKeys(): Promise<void> {
    const pruned = await pruneIdempotencyKeys(this.deps.db, idempotencyKeyTtlMs);
    if (pruned > 0) this.deps.log.info({ pruned }, 'pruned old PublishEvent idempotency keys');
  }
}

/**
 * agent.completed from the stream: an event envelope (what PublishEvent writes), or the bare
 * `{workspace_id, type?, data}` an agent runtime may publish to the subject itself (docs/api/internal-calls.md#publishevent). A
 * bare message is identified by its `Nats-Msg-Id` when that is an event id, else by its stream
 * sequence, so a redelivery is the same event.
 */
export function parseAgentCompleted(msg: JsMsg): EventEnvelopeJson {
  const json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(msg.data)) as unknown;
  if (json !== null && typeof json === 'object' && !Array.isArray(json) && 'event_id' in json) {
    const envelope = parseEventEnvelope(msg.data);
    if (envelope.type !== agentCompleted) throw new Error(`a ${envelope.type} event on the agent.completed subject`);
    // An outside producer's envelope may lack a valid time: the stream's is the event's then (its
    // body's timestamp must be one, and one bad row would fail its whole fan-out batch).
    if (Number.isNaN(Date.parse(envelope.occurred_at))) return { ...envelope, occurred_at: streamTime(msg) };
    return envelope;
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new Error('agent.completed is not a JSON object');
  const bare = json as { workspace_id?: unknown; workspaceId?: unknown; type?: unknown; data?: unknown };
  const workspaceId = bare.workspace_id ?? bare.workspaceId;
  if (typeof workspaceId !== 'string' || !workspaceIdPattern.test(workspaceId)) throw new Error('agent.completed has no workspace_id');
  if (bare.type !== undefined && bare.type !== agentCompleted) throw new Error('a message on the agent.completed subject has another type');
  const data = bare.data ?? {};
  if (data === null || typeof data !== 'object' || Array.isArray(data)) throw new Error('agent.completed data is not a JSON object');
  const msgId = msg.headers?.get('Nats-Msg-Id') ?? '';
  return {
    // The stream's sequence with the time it stored the message: the same on a redelivery, and
    // unlike the sequence alone never reused by a stream created again.
    event_id: /^evt_[A-Za-z0-9_-]{1,100}$/.test(msgId)
      ? msgId
      : `evt_js${createHash('sha256').update(`${msg.seq}:${msg.info.timestampNanos}`).digest('base64url').slice(0, 22)}`,
    type: agentCompleted,
    workspace_id: workspaceId,
    occurred_at: streamTime(msg),
    data: data as JsonObject,
    producer: 'jetstream',
    request_id: '',
  };
}

/** When the stream stored the message. */
function streamTime(msg: JsMsg): string {
  return new Date(Math.floor(msg.info.timestampNanos / 1_000_000)).toISOString();
}
