import { create, type DescMessage, type JsonObject, type JsonValue, type MessageInitShape, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { type Client, Code, type HandlerContext } from '@connectrpc/connect';
import type { HttpBodySchema } from '@switchboard/contracts/google/api/httpbody_pb';
import {
  ConversationSchema,
  type ConversationService,
  FeedbackSchema,
  MessageSchema,
} from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import type { DataExportSchema } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { KeySchema, type KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { type AuditTrail, callerAuditRecord } from '@switchboard/runtime/audit';
import type { Caller } from '@switchboard/runtime/caller';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { apiError } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import { errorMessage, type Logger } from '@switchboard/runtime/log';
import { startPeriodic } from '@switchboard/runtime/periodic';
import type { DataKeyRing } from '@switchboard/runtime/secrets';
import { statusOverrideHeader } from '@switchboard/runtime/server';
import type { BackgroundTask } from '@switchboard/runtime/service';
import { withTimeout } from '@switchboard/runtime/timing';
import type { ActionLimits } from './action-limits.js';
import type { AccountMail } from './notifications.js';
import {
  accountToExport,
  auditEventsToExport,
  claimDueExport,
  completeExport,
  type DataExportRow,
  expireExports,
  failExportAttempt,
  findPendingExport,
  findUserExport,
  insertPendingExport,
  invitationsToExport,
  membershipsToExport,
  sessionsToExport,
} from './store/data-exports.js';

/**
 * The self-service data export (GDPR art. 15 and 20; docs/api/identity.md#data-export). A request
 * writes a pending row and its `account.export_requested` audit record in one transaction (asking
 * again while one is pending answers that one); a worker of this service builds ONE JSON document
 * from identity's tables, the keys service (ExportUserKeys) and the conversations service
 * (ExportUserConversations), encrypts it under the data keys, and mails the user the link. The
 * link works for 7 days; then the sweeper deletes the document and the link answers 410.
 */

export const exportDocumentPurpose = 'identity.data-export';
/** How long a ready export can be downloaded. */
export const exportLifetimeMs = 7 * 24 * 3600 * 1000;

/** What one document holds at most (newest first); `truncated` in the document says what was cut. */
export const exportLimits = {
  sessions: 1_000,
  invitations: 1_000,
  keys: 1_000,
  conversations: 1_000,
  messages: 20_000,
  messageChars: 10_000_000,
  feedback: 10_000,
  auditEvents: 10_000,
} as const;

/** Attempts before an export ends `failed`; between them 30 s, 1, 2, 4 min (doubling, at most 10 min). */
export const exportMaxAttempts = 5;
const retryBaseMs = 30_000;
const retryMaxMs = 10 * 60_000;
/** Each call to another service; the whole build has its own bound, and the lease is longer still. */
const callTimeoutMs = 10_000;
const buildTimeoutMs = 60_000;
const leaseMs = 5 * 60_000;

export const retryDelayMs = (attempts: number) => Math.min(retryMaxMs, retryBaseMs * 2 ** Math.max(0, attempts - 1));

const exportNotFound = () => apiError(Code.NotFound, 'export_not_found', 'You have no data export with this id.');
const exportExpired = () =>
  apiError(Code.FailedPrecondition, 'export_expired', 'This data export is older than 7 days and its copy is deleted; ask for a new one.', { httpStatus: 410 });
const exportFailed = () => apiError(Code.FailedPrecondition, 'export_failed', 'This data export could not be built; ask for a new one.', { httpStatus: 410 });

export interface DataExportsDeps {
  db: Knex;
  log: Logger;
  dataKeys: DataKeyRing;
  audit: AuditTrail;
  mail: AccountMail;
  /** DATA_EXPORTS_PER_USER_PER_HOUR: each new export counts (asking for a pending one does not). */
  limits: Pick<ActionLimits, 'take'>;
  keys: Pick<Client<typeof KeyService>, 'exportUserKeys'>;
  conversations: Pick<Client<typeof ConversationService>, 'exportUserConversations'>;
  clock?: Clock;
}

type DataExportRecord = MessageInitShape<typeof DataExportSchema>;
type HttpBody = MessageInitShape<typeof HttpBodySchema>;

const toRecord = (row: DataExportRow): DataExportRecord => ({
  exportId: row.id,
  status: row.status,
  createdAt: timestampFromDate(row.created_at),
  expiresAt: row.expires_at ? timestampFromDate(row.expires_at) : undefined,
});

const jsonBody = (json: unknown): HttpBody => ({ contentType: 'application/json', data: Buffer.from(JSON.stringify(json), 'utf8') });
const iso = (date: Date | null | undefined) => (date ? date.toISOString() : null);

/**
 * A message as the public JSON shows it (proto field names, every field present: null when unset,
 * [] and {} when empty), so records in the document read as the API's records.
 */
function recordJson<Desc extends DescMessage>(desc: Desc, init: MessageInitShape<Desc>): JsonObject {
  const json = toJson(desc, create(desc, init), { useProtoFieldName: true, alwaysEmitImplicit: true }) as JsonObject;
  for (const field of desc.fields) {
    if (json[field.name] === undefined) json[field.name] = field.fieldKind === 'list' ? [] : field.fieldKind === 'map' ? {} : null;
  }
  return json;
}

/** A key's record in the document: its workspace added, the shown-once secret's field left out (never set here anyway). */
function keyJson(key: MessageInitShape<typeof KeySchema>, workspaceId: string): JsonObject {
  const { signing_secret: _shownOnce, ...record } = recordJson(KeySchema, key);
  return { ...record, workspace_id: workspaceId };
}

export class DataExports {
  private running: Promise<void> | undefined;
  private again = false;

  constructor(private readonly deps: DataExportsDeps) {}

  private now(): Date {
    return (this.deps.clock ?? systemClock)();
  }

  /** POST /v1/account/export: a new pending export, or the one already pending (same id). */
  async request(caller: Caller): Promise<DataExportRecord> {
    const { db, audit } = this.deps;
    const waiting = await findPendingExport(db, caller.userId);
    if (waiting) return toRecord(waiting);
    await this.deps.limits.take('data_export', { userId: caller.userId });
    const created = await db.transaction(async (trx) => {
      const user = await accountToExport(trx, caller.userId);
      if (!user) throw exportNotFound();
      const row = await insertPendingExport(trx, { id: newId('exp'), userId: caller.userId, now: this.now() });
      if (row) {
        await audit.record(
          trx,
          callerAuditRecord(caller, 'account.export_requested', { type: 'export', id: row.id }, { workspaceId: user.personal_workspace_id }),
        );
      }
      return row;
    });
    if (created) {
      this.kick();
      return toRecord(created);
    }
    const pending = await findPendingExport(db, caller.userId);
    // Built between the insert and this read: asking again makes a new one.
    return pending ? toRecord(pending) : this.request(caller);
  }

  /** GET /v1/account/exports/{export_id}: the document (200), `{export_id, status}` while pending (202), 404, or 410. */
  async download(userId: string, exportId: string, ctx: HandlerContext): Promise<HttpBody> {
    const row = exportId ? await findUserExport(this.deps.db, userId, exportId) : undefined;
    if (!row) throw exportNotFound();
    if (row.status === 'pending') {
      ctx.responseHeader.set(statusOverrideHeader, '202');
      return jsonBody({ export_id: row.id, status: row.status });
    }
    if (row.status === 'failed') throw exportFailed();
    // Past its expiry it is gone, even before the sweeper has deleted the copy.
    if (row.status === 'expired' || !row.expires_at || row.expires_at <= this.now() || row.document_encrypted === null) throw exportExpired();
    return { contentType: 'application/json', data: this.deps.dataKeys.decryptBytes(row.document_encrypted, exportDocumentPurpose) };
  }

  /** Builds the exports that are due now, one after another, until none is left. */
  runDue(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        while (await this.buildOne());
      } while (this.again);
    })()
      .catch((err: unknown) => this.deps.log.warn({ err: errorMessage(err) }, 'data export run failed'))
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  /** Deletes the documents past their expiry. */
  async sweep(): Promise<number> {
    const expired = await expireExports(this.deps.db, this.now());
    if (expired > 0) this.deps.log.info({ exports: expired }, 'expired data exports deleted');
    return expired;
  }

  /** The worker (every `intervalMs`: due builds and retries, then the sweep); requests start a build at once. */
  start(intervalMs: number): BackgroundTask {
    const periodic = startPeriodic({
      name: 'data-exports',
      everyMs: intervalMs,
      firstRunAfterMs: Math.min(intervalMs, 1000),
      log: this.deps.log,
      run: async () => {
        await this.runDue();
        await this.sweep();
      },
    });
    return {
      stop: async () => {
        await periodic.stop();
        // A build in flight ends or is cut short (its lease lets another replica finish it later).
        if (this.running) await withTimeout(this.running, 15_000, 'data export stopping').catch(() => this.deps.log.warn('data export still building at stop'));
      },
    };
  }

  private kick(): void {
    void this.runDue();
  }

  /** Claims and builds one due export; false when none is due. */
  private async buildOne(): Promise<boolean> {
    const now = this.now();
    const row = await claimDueExport(this.deps.db, now, new Date(now.getTime() + leaseMs));
    if (!row) return false;
    const log = this.deps.log.child({ export_id: row.id, user_id: row.user_id, attempt: row.attempts });
    try {
      const { json, email, fullName } = await withTimeout(this.assemble(row), buildTimeoutMs, 'building the data export');
      const readyAt = this.now();
      const expiresAt = new Date(readyAt.getTime() + exportLifetimeMs);
      const stored = await completeExport(this.deps.db, row.id, {
        encrypted: this.deps.dataKeys.encrypt(json, exportDocumentPurpose),
        bytes: Buffer.byteLength(json, 'utf8'),
        readyAt,
        expiresAt,
      });
      if (!stored) return true;
      log.info({ bytes: Buffer.byteLength(json, 'utf8') }, 'data export ready');
      await this.deps.mail.dataExportReady({ id: row.user_id, email, fullName }, row.id, expiresAt);
    } catch (err) {
      const last = row.attempts >= exportMaxAttempts;
      const reason = errorMessage(err).slice(0, 500);
      await failExportAttempt(this.deps.db, row.id, reason, last ? undefined : new Date(this.now().getTime() + retryDelayMs(row.attempts)));
      if (last) log.error({ err: reason }, 'data export failed for good');
      else log.warn({ err: reason, retry_in_ms: retryDelayMs(row.attempts) }, 'data export attempt failed; retrying');
    }
    return true;
  }

  /** The document of `row`'s user, as JSON text. */
  private async assemble(row: DataExportRow): Promise<{ json: string; email: string; fullName: string | null }> {
    const { db } = this.deps;
    const user = await accountToExport(db, row.user_id);
    if (!user) throw new Error('the account is gone');
    const [sessions, memberships, invitations, auditEvents, keys, workspace] = await Promise.all([
      sessionsToExport(db, user.id, exportLimits.sessions),
      membershipsToExport(db, user.id),
      invitationsToExport(db, user, exportLimits.invitations),
      auditEventsToExport(db, user.id, exportLimits.auditEvents),
      this.deps.keys.exportUserKeys({ userId: user.id, limit: exportLimits.keys }, { timeoutMs: callTimeoutMs }),
      this.deps.conversations.exportUserConversations(
        {
          workspaceId: user.personal_workspace_id,
          maxConversations: exportLimits.conversations,
          maxMessages: exportLimits.messages,
          maxContentChars: BigInt(exportLimits.messageChars),
          maxFeedback: exportLimits.feedback,
        },
        { timeoutMs: callTimeoutMs },
      ),
    ]);
    const document = {
      export_id: row.id,
      format_version: 1,
      generated_at: this.now().toISOString(),
      account: {
        user_id: user.id,
        email: user.email,
        email_verified: user.email_verified_at !== null,
        email_verified_at: iso(user.email_verified_at),
        full_name: user.full_name,
        personal_workspace_id: user.personal_workspace_id,
        two_factor_enabled: user.two_factor_enabled,
        password_changed_at: iso(user.password_changed_at),
        created_at: iso(user.created_at),
        updated_at: iso(user.updated_at),
        deactivated_at: iso(user.deactivated_at),
      },
      sessions: sessions.slice(0, exportLimits.sessions).map((s) => ({
        session_id: s.id,
        aal: s.aal,
        ip: s.ip,
        user_agent: s.user_agent,
        created_at: iso(s.created_at),
        last_used_at: iso(s.last_used_at),
        expires_at: iso(s.expires_at),
        revoked_at: iso(s.revoked_at),
        revoked_reason: s.revoked_reason,
      })),
      memberships: memberships.map((m) => ({
        organization_id: m.org_id,
        organization_name: m.name,
        personal: m.personal,
        role: m.role,
        joined_at: iso(m.created_at),
      })),
      invitations: invitations.slice(0, exportLimits.invitations).map((i) => ({
        invitation_id: i.id,
        // received: sent to the user's address (or accepted by them); sent: the user invited someone.
        direction: i.invited_by === user.id && i.email !== user.email ? 'sent' : 'received',
        organization_id: i.org_id,
        organization_name: i.org_name,
        email: i.email,
        role: i.role,
        invited_by: i.invited_by,
        created_at: iso(i.created_at),
        expires_at: iso(i.expires_at),
        accepted_at: iso(i.accepted_at),
        accepted_by: i.accepted_by,
        revoked_at: iso(i.revoked_at),
      })),
      keys: keys.keys.map((k) => keyJson(k.key ?? {}, k.workspaceId)),
      conversations: workspace.conversations.map((c) => ({
        ...recordJson(ConversationSchema, c.conversation ?? {}),
        workspace_id: user.personal_workspace_id,
        messages: c.messages.map((m) => recordJson(MessageSchema, m)),
      })),
      feedback: workspace.feedback.map((f) => recordJson(FeedbackSchema, f)),
      audit_events: auditEvents.slice(0, exportLimits.auditEvents).map((a) => ({
        event_id: a.id,
        action: a.action,
        actor: { type: a.actor_type, id: a.actor_id, ip: a.actor_ip },
        target: a.target_type ? { type: a.target_type, id: a.target_id ?? '' } : null,
        workspace_id: a.workspace_id,
        request_id: a.request_id,
        outcome: a.outcome,
        metadata: a.metadata as JsonValue,
        created_at: iso(a.created_at),
      })),
      truncated: {
        sessions: sessions.length > exportLimits.sessions,
        invitations: invitations.length > exportLimits.invitations,
        keys: keys.truncated,
        conversations: workspace.conversationsTruncated,
        messages: workspace.messagesTruncated,
        feedback: workspace.feedbackTruncated,
        audit_events: auditEvents.length > exportLimits.auditEvents,
      },
    };
    return { json: JSON.stringify(document, null, 2), email: user.email, fullName: user.full_name };
  }
}
