import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { AuditRecordedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { AuditEventSchema, ListAuditEventsResponseSchema } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import type { WorkspaceCaller } from '@switchboard/runtime/caller';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import { consumeEvents, type EventConsumerHost, onEventBatch, type ReceivedEvent } from '@switchboard/runtime/consumer';
import type { Knex } from '@switchboard/runtime/db';
import { invalidArgument } from '@switchboard/runtime/errors';
import type { Logger } from '@switchboard/runtime/log';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import { startPeriodic } from '@switchboard/runtime/periodic';
import { timeParameter } from '@switchboard/runtime/rfc3339';
import type { BackgroundTask } from '@switchboard/runtime/service';
import { type AuditEventRow, deleteAuditEventsBefore, insertAuditEvents, listAuditEvents, type NewAuditEventRow } from './store/audit-events.js';

/**
 * The audit log (docs/api/audit.md): every service writes `audit.recorded` events in the
 * transaction of the action (runtime/src/audit.ts, the outbox); identity consumes them from every
 * producer into `audit_events`, append-only, and lists a workspace's records to its owners and
 * admins. Records are kept AUDIT_RETENTION (at least 365 days), then swept.
 */

/** The NOLOGIN role holding only SELECT and INSERT on audit_events (migration 008). */
export const auditWriterRole = 'switchboard_audit_writer';

export const dayMs = 24 * 3600 * 1000;
/** The least AUDIT_RETENTION: a year (docs/api/audit.md#retention; the table's trigger refuses younger deletes anyway). */
export const minAuditRetentionMs = 365 * dayMs;
const maxFilterLength = 200;
const sweepBatch = 1000;

export interface AuditLogDeps {
  /** The owner's pool: the consumer's transactions (processed_events) and the retention sweeper. */
  db: Knex;
  /** The pool whose connections act as switchboard_audit_writer: every read of the API. */
  reader: Knex;
  log: Logger;
  retentionMs: number;
  clock?: Clock;
}

export class AuditLog {
  constructor(private readonly deps: AuditLogDeps) {}

  /**
   * Stores a batch of `audit.recorded` events, in the consumer's transaction. The consumer has
   * recorded them in processed_events as the owner; from here on the transaction acts as the
   * writer role (SET LOCAL: until it ends), so the rows go in with that role's rights only.
   */
  async recorded(trx: Knex.Transaction, events: ReceivedEvent<typeof AuditRecordedSchema>[]): Promise<void> {
    await trx.raw(`SET LOCAL ROLE ${auditWriterRole}`);
    await insertAuditEvents(trx, events.map(toRow));
  }

  /** The caller's workspace's records, newest first (docs/api/audit.md#listing). */
  async list(
    caller: WorkspaceCaller,
    input: { limit?: number; after?: string; action: string; actorId: string; since: string; until: string },
  ): Promise<MessageInitShape<typeof ListAuditEventsResponseSchema>> {
    const limit = parseLimit(input.limit);
    const after = decodeCursor(input.after);
    // The proto's rule keeps `action` to the catalogue (docs/api/audit.md#actions) before this runs.
    const action = input.action || undefined;
    const actorId = filterText(input.actorId, 'actor_id');
    const since = timeParameter(input.since, 'since');
    const until = timeParameter(input.until, 'until');
    if (since && until && since.getTime() > until.getTime()) throw invalidArgument('since', 'since must not be after until.');
    const rows = await listAuditEvents(this.deps.reader, { workspaceId: caller.workspaceId, action, actorId, since, until }, { limit, after });
    const page = pageOf(rows, limit, (row) => ({ micros: row.cursor_micros, id: row.id }));
    return { data: page.rows.map(toAuditEvent), hasMore: page.hasMore, nextCursor: page.nextCursor };
  }

  /** Deletes the records older than the retention (the owner's pool); returns how many. */
  async sweep(): Promise<number> {
    const before = new Date((this.deps.clock ?? systemClock)().getTime() - this.deps.retentionMs);
    let total = 0;
    for (;;) {
      const deleted = await deleteAuditEventsBefore(this.deps.db, before, sweepBatch);
      total += deleted;
      if (deleted < sweepBatch) return total;
    }
  }

  /** The consumer of `audit.recorded`, the retention sweeper, and the reader pool's end. */
  start(host: EventConsumerHost, sweepEveryMs: number): BackgroundTask[] {
    return [
      ...consumeEvents(host, [onEventBatch(AuditRecordedSchema, (events, trx) => this.recorded(trx, events))]),
      startPeriodic({
        name: 'audit retention',
        everyMs: sweepEveryMs,
        log: this.deps.log,
        run: async () => {
          const deleted = await this.sweep();
          if (deleted > 0) this.deps.log.info({ deleted }, 'audit records past AUDIT_RETENTION deleted');
        },
      }),
      { stop: () => this.deps.reader.destroy() },
    ];
  }
}

/** The row of an event: `aud_` + the event id without its `evt_`; workspace, request and time from the envelope. */
export function toRow(event: ReceivedEvent<typeof AuditRecordedSchema>): NewAuditEventRow {
  const { data } = event;
  return {
    id: `aud_${event.event_id.replace(/^evt_/, '')}`,
    workspace_id: event.workspace_id,
    action: data.action,
    actor_type: data.actorType,
    actor_id: data.actorId,
    actor_ip: data.actorIp || null,
    target_type: data.targetType || null,
    target_id: data.targetType ? data.targetId : null,
    outcome: data.outcome,
    metadata: (data.metadata as Record<string, unknown> | undefined) ?? {},
    request_id: event.request_id || null,
    subject_user_id: data.subjectUserId || null,
    producer: event.producer,
    created_at: event.occurred_at || new Date(),
  };
}

export function toAuditEvent(row: AuditEventRow): MessageInitShape<typeof AuditEventSchema> {
  return {
    eventId: row.id,
    action: row.action,
    actor: { type: row.actor_type, id: row.actor_id, ip: row.actor_ip ?? undefined },
    target: row.target_type ? { type: row.target_type, id: row.target_id ?? '' } : undefined,
    workspaceId: row.workspace_id,
    requestId: row.request_id ?? undefined,
    outcome: row.outcome,
    metadata: row.metadata as MessageInitShape<typeof AuditEventSchema>['metadata'],
    createdAt: timestampFromDate(row.created_at),
  };
}

function filterText(raw: string, field: string): string | undefined {
  const value = raw.trim();
  if (value.length > maxFilterLength) throw invalidArgument(field, `${field} must be at most ${maxFilterLength} characters long.`);
  return value || undefined;
}
