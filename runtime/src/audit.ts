import { clientIpOf } from './call-context.js';
import type { Caller } from './caller.js';
import type { Logger } from './log.js';

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
