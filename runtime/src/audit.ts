import type { MessageInitShape } from '@bufbuild/protobuf';
import { AuditRecordedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { clientIpOf } from './call-context.js';
import type { Caller } from './caller.js';
import { afterCommit, type Knex } from './db.js';
import type { Logger } from './log.js';
import type { RecordEventInput } from './outbox.js';

/**
 * Audit lines (OWASP ASVS 16.3): security events as log lines with one fixed set of fields, so
 * they can be filtered (`audit: true`) and shipped apart. Successes are info, failures and
 * refusals warn. Never a secret: callers pass ids, addresses and reason codes only.
 */
export interface AuditEvent {
  /** What happened, dotted: `login.password`, `credentials.password_changed`, `authorization`. */
  event: string;
  outcome: 'success' | 'failure' | 'denied';
  userId?: string;
  ip?: string;
  requestId?: string;
  /** A machine-readable reason for failures and refusals (an error code, a rule). */
  reason?: string;
  /** Other ids that say what the event was about (an organization, a target user, an RPC). */
  details?: Record<string, string | number | boolean | undefined>;
}

export function audit(log: Logger, event: AuditEvent): void {
  const line = {
    audit: true,
    event: event.event,
    outcome: event.outcome,
    user_id: event.userId,
    ip: event.ip,
    request_id: event.requestId,
    reason: event.reason,
    ...event.details,
  };
  if (event.outcome === 'success') log.info(line, `audit: ${event.event}`);
  else log.warn(line, `audit: ${event.event} ${event.outcome}`);
}

/** The audit line of a change a caller made: who, from which address, in which request, about what (`details`). */
export function auditCallerSuccess(log: Logger, caller: Caller, event: string, details: AuditEvent['details']): void {
  audit(log, { event, outcome: 'success', userId: caller.userId, ip: clientIpOf(caller.ctx), requestId: caller.requestId, details });
}

// ---------------------------------------------------------------------------------------------
// The audit log (docs/api/audit.md): the records a workspace's owners and admins read. A service
// writes each as an `audit.recorded` event in the transaction of the action (the outbox), so a
// record exists if and only if the action committed; identity keeps them, append-only.

export type AuditOutcome = 'success' | 'denied' | 'failed';

/** Who acted: a user's session, an API key, or the platform itself (a sweeper, a provider's webhook). */
export interface AuditActor {
  type: 'user' | 'api_key' | 'system';
  /** The user's or the key's id; empty for system. */
  id: string;
  ip?: string;
}

export interface AuditRecord {
  /** From the catalogue of docs/api/audit.md, e.g. `key.created`, `access.denied`. */
  action: string;
  outcome: AuditOutcome;
  actor: AuditActor;
  target?: { type: string; id: string };
  /** The workspace it belongs to; a user's own account events belong to their personal workspace. */
  workspaceId: string;
  requestId?: string;
  /** The user the record is about (the actor, or the user acted upon), for the data export. */
  subjectUserId?: string;
  /** Ids, reason codes, changed field names: never a secret. */
  metadata?: Record<string, string | number | boolean | undefined>;
}

/** The actor of a call: its API key when it came with one, else the signed-in user. */
export function actorOf(caller: Pick<Caller, 'ctx' | 'userId' | 'principalType' | 'keyId'>): AuditActor {
  const ip = clientIpOf(caller.ctx);
  if (caller.principalType === 'key' && caller.keyId) return { type: 'api_key', id: caller.keyId, ip };
  return { type: 'user', id: caller.userId, ip };
}

/** A caller's successful action on `target`, in the caller's workspace. */
export function callerAuditRecord(
  caller: Caller,
  action: string,
  target: AuditRecord['target'],
  extra: Partial<Pick<AuditRecord, 'outcome' | 'metadata' | 'subjectUserId' | 'workspaceId'>> = {},
): AuditRecord {
  return {
    action,
    outcome: 'success',
    actor: actorOf(caller),
    target,
    workspaceId: caller.workspaceId ?? '',
    requestId: caller.requestId,
    subjectUserId: caller.userId,
    ...extra,
  };
}

/** Writes an event in a transaction: ServiceRuntime.recordEvent bound to AuditRecordedSchema's shape. */
type AuditEventWriter = (trx: Knex.Transaction, schema: typeof AuditRecordedSchema, event: RecordEventInput<typeof AuditRecordedSchema>) => Promise<string>;

export interface AuditTrailDeps {
  log: Logger;
  db: Knex;
  recordEvent: AuditEventWriter;
}

/**
 * What a service's domain modules get to write audit records: in the transaction of the action
 * (`record`), or alone for a refusal that changes nothing (`recordAlone`). Each also writes the
 * audit log line (the `audit` function above), so logs and the audit log say the same.
 */
export class AuditTrail {
  constructor(private readonly deps: AuditTrailDeps) {}

  async record(trx: Knex.Transaction, record: AuditRecord): Promise<void> {
    await this.recordAll(trx, [record]);
  }

  async recordAll(trx: Knex.Transaction, records: AuditRecord[]): Promise<void> {
    // The log line says what happened: only once it has (a rolled-back action has none).
    afterCommit(trx, () => {
      for (const record of records) this.logLine(record);
    });
    await this.writeEvents(trx, records);
  }

  /**
   * A record of its own transaction (a refusal, a failed sign-in): best effort by design, a
   * database that fails here must not turn the refusal into a 503 (the log line stays).
   */
  recordAlone(record: AuditRecord): Promise<void> {
    this.logLine(record);
    return this.deps.db
      .transaction((trx) => this.writeEvents(trx, [record]))
      .catch((err) => this.deps.log.error({ err: (err as Error).message, action: record.action }, 'audit record not written'));
  }

  private async writeEvents(trx: Knex.Transaction, records: AuditRecord[]): Promise<void> {
    for (const record of records) {
      // A record without a workspace has no reader (a sign-in attempt on an unknown email): the log line only.
      if (record.workspaceId === '') continue;
      await this.deps.recordEvent(trx, AuditRecordedSchema, { workspaceId: record.workspaceId, requestId: record.requestId, data: toEventData(record) });
    }
  }

  private logLine(record: AuditRecord): void {
    auditRecordLine(this.deps.log, record);
  }
}

/** The audit log line of a record (what AuditTrail and AuditPublisher write with each). */
export function auditRecordLine(log: Logger, record: AuditRecord): void {
  audit(log, {
    event: record.action,
    outcome: record.outcome === 'failed' ? 'failure' : record.outcome,
    userId: record.actor.type === 'user' ? record.actor.id : record.subjectUserId,
    ip: record.actor.ip,
    requestId: record.requestId,
    details: {
      workspace_id: record.workspaceId || undefined,
      key_id: record.actor.type === 'api_key' ? record.actor.id : undefined,
      target_type: record.target?.type,
      target_id: record.target?.id,
      ...record.metadata,
    },
  });
}

/** The event payload of a record (metadata's undefined values left out). */
export function toEventData(record: AuditRecord): MessageInitShape<typeof AuditRecordedSchema> {
  const metadata: Record<string, string | number | boolean> = {};
  for (const [name, value] of Object.entries(record.metadata ?? {})) if (value !== undefined) metadata[name] = value;
  return {
    action: record.action,
    actorType: record.actor.type,
    actorId: record.actor.id,
    actorIp: record.actor.ip ?? '',
    targetType: record.target?.type ?? '',
    targetId: record.target?.id ?? '',
    outcome: record.outcome,
    metadata,
    subjectUserId: record.subjectUserId ?? '',
  };
}

/**
 * The miss path of a lookup by id in the caller's workspace (docs/api/audit.md, `access.denied`):
 * when the id names an object of ANOTHER workspace (`existsElsewhere`, a cheap indexed query run
 * only here), an `access.denied` record (reason `not_found`) in the caller's workspace, so its
 * owners and admins see the probe. The answer stays the same 404; a plain miss records nothing.
 * Never throws, and never holds the caller's transaction: call it with `void` and the pool
 * (not the transaction) in `existsElsewhere`.
 */
export async function recordForeignObjectProbe(
  trail: AuditTrail,
  caller: Caller,
  target: { type: string; id: string },
  existsElsewhere: () => Promise<boolean>,
): Promise<void> {
  if (!target.id || !caller.workspaceId) return;
  try {
    if (!(await existsElsewhere())) return;
  } catch {
    return;
  }
  const method = caller.ctx.method;
  await trail.recordAlone({
    action: 'access.denied',
    outcome: 'denied',
    actor: actorOf(caller),
    target,
    workspaceId: caller.workspaceId,
    requestId: caller.requestId,
    subjectUserId: caller.userId,
    metadata: { reason: 'not_found', rpc: method ? `${method.parent.typeName}/${method.name}` : undefined },
  });
}
