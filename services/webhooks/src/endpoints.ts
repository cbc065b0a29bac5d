import type { JsonValue, MessageInitShape } from '@bufbuild/protobuf';
import type { ListWebhooksResponseSchema, WebhookSchema } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { type AuditTrail, callerAuditRecord, recordForeignObjectProbe } from '@switchboard/runtime/audit';
import type { WorkspaceCaller as Caller } from '@switchboard/runtime/caller';
import { afterCommit, type Knex } from '@switchboard/runtime/db';
import { invalidArgument, unprocessable } from '@switchboard/runtime/errors';
import { newId, newSigningSecret } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import type { DataKeyRing } from '@switchboard/runtime/secrets';
import { parseHttpsUrl } from '@switchboard/runtime/urls';
import { allow, webhookNotFound } from './access.js';
import { isWebhookEventType, webhookEventTypes } from './event-types.js';
import { toWebhook } from './records.js';
import {
  deleteEndpoint,
  type EndpointChanges,
  type EndpointRow,
  findEndpoint,
  insertEndpoint,
  listEndpoints,
  lockAndCountEndpoints,
  lockEndpoint,
  replaceSecret,
  updateEndpoint,
  webhookExists,
} from './store/endpoints.js';

/**
 * A workspace's webhook endpoints (docs/webhooks.md#endpoints): registration with a signing secret shown once,
 * reads, changes, rotation with a grace period, and deletion. Each change locks the endpoint and
 * decides in the contract's order: the endpoint in the workspace (404) → the role (403) → the
 * input (400).
 */

/** The purpose label of endpoint signing secrets under the data keys. */
export const endpointSecretPurpose = 'webhooks.signing-secret';

export type WebhookRecord = MessageInitShape<typeof WebhookSchema>;

/** Descriptions are free text for people; a bound keeps rows and lists small. */
const maxDescriptionLength = 1000;
/** docs/webhooks.md#disabling-and-recovery: 0..7 days, default 24 h. */
const maxGraceSeconds = 7 * 24 * 3600;
const defaultGraceSeconds = 24 * 3600;

export interface EndpointsDeps {
  db: Knex;
  log: Logger;
  dataKeys: DataKeyRing;
  /** Where changes of endpoints are recorded (docs/api/audit.md, `webhook.*`). */
  audit: AuditTrail;
  /** Runs after a commit that made deliveries due (an endpoint re-enabled). */
  onQueued: () => void;
  /** How many webhook endpoints a workspace may have (WEBHOOK_MAX_ENDPOINTS). */
  maxEndpoints: number;
}

export class Endpoints {
  constructor(private readonly deps: EndpointsDeps) {}

  async create(caller: Caller, input: { url: string; events: string[]; description?: string }): Promise<WebhookRecord> {
    allow(caller, 'webhooks.manage');
    const url = parseHttpsUrl(input.url, 'url');
    const events = parseEvents(input.events);
    const description = parseDescription(input.description);
    const secret = newSigningSecret();
    const id = newId('wh');
    const row = await this.deps.db.transaction(async (trx) => {
      const { maxEndpoints } = this.deps;
      if ((await lockAndCountEndpoints(trx, caller.workspaceId)) >= maxEndpoints) {
        throw unprocessable('endpoint_limit_reached', `This workspace has ${maxEndpoints} webhook endpoints, as many as it may have; delete one first.`, {
          metadata: { limit: maxEndpoints },
        });
      }
      const inserted = await insertEndpoint(trx, {
        id,
        workspaceId: caller.workspaceId,
        url,
        events,
        description,
        secretEncrypted: this.deps.dataKeys.encrypt(secret, endpointSecretPurpose),
        createdBy: caller.userId,
      });
      await this.deps.audit.record(trx, webhookAudit(caller, 'webhook.created', id));
      return inserted;
    });
    return toWebhook(row, secret);
  }

  async list(caller: Caller, input: { limit?: number; after?: string }): Promise<MessageInitShape<typeof ListWebhooksResponseSchema>> {
    allow(caller, 'webhooks.read');
    const limit = parseLimit(input.limit);
    const after = decodeCursor(input.after);
    const rows = await listEndpoints(this.deps.db, caller.workspaceId, { limit, after });
    const page = pageOf(rows, limit, (row) => ({ micros: row.cursor_micros, id: row.id }));
    return { data: page.rows.map((row) => toWebhook(row)), hasMore: page.hasMore, nextCursor: page.nextCursor };
  }

  async get(caller: Caller, webhookId: string): Promise<WebhookRecord> {
    return toWebhook(await this.find(caller, webhookId, 'webhooks.read'));
  }

  /** The endpoint `webhookId` of the caller's workspace, once the caller may `action` it. */
  async find(caller: Caller, webhookId: string, action: 'webhooks.read' | 'webhooks.manage'): Promise<EndpointRow> {
    const row = webhookId ? await findEndpoint(this.deps.db, webhookId, caller.workspaceId) : undefined;
    if (!row) throw this.notFound(caller, webhookId);
    allow(caller, action);
    return row;
  }

  async update(
    caller: Caller,
    webhookId: string,
    input: { url?: string; events?: JsonValue[]; description?: string; enabled?: boolean },
  ): Promise<WebhookRecord> {
    return this.deps.db.transaction(async (trx) => {
      const current = await this.lockVisible(trx, caller, webhookId);
      const changes: EndpointChanges = {};
      if (input.url !== undefined) changes.url = parseHttpsUrl(input.url, 'url');
      if (input.events !== undefined) {
        changes.events = parseEvents(
          input.events.map((value, index) => {
            if (typeof value !== 'string') throw invalidArgument(`events[${index}]`, 'events must be an array of event type strings.');
            return value;
          }),
        );
      }
      if (input.description !== undefined) changes.description = parseDescription(input.description);
      if (input.enabled !== undefined) changes.enabled = input.enabled;
      const row = await updateEndpoint(trx, webhookId, changes);
      // Retries that waited while it was disabled are due again.
      if (input.enabled === true) afterCommit(trx, this.deps.onQueued);
      // Every change is audited: events and description decide what reaches the URL and how it reads, too.
      const fields = changedFields(current, changes);
      if (fields.length > 0) await this.deps.audit.record(trx, webhookAudit(caller, 'webhook.updated', webhookId, { changed_fields: fields.join(',') }));
      return toWebhook(row);
    });
  }

  async delete(caller: Caller, webhookId: string): Promise<void> {
    await this.deps.db.transaction(async (trx) => {
      await this.lockVisible(trx, caller, webhookId);
      await deleteEndpoint(trx, webhookId);
      await this.deps.audit.record(trx, webhookAudit(caller, 'webhook.deleted', webhookId));
    });
  }

  /** A new secret, shown once; the old one keeps signing too until the grace period ends. */
  async rotateSecret(caller: Caller, webhookId: string, gracePeriodSeconds: number | undefined): Promise<WebhookRecord> {
    return this.deps.db.transaction(async (trx) => {
      const current = await this.lockVisible(trx, caller, webhookId);
      const grace = gracePeriodSeconds ?? defaultGraceSeconds;
      if (!Number.isInteger(grace) || grace < 0 || grace > maxGraceSeconds) {
        throw invalidArgument('grace_period_seconds', `grace_period_seconds must be an integer from 0 to ${maxGraceSeconds} (7 days).`);
      }
      const secret = newSigningSecret();
      const row = await replaceSecret(trx, webhookId, {
        current: this.deps.dataKeys.encrypt(secret, endpointSecretPurpose),
        previous: grace > 0 ? current.secret_encrypted : null,
        previousExpiresAt: grace > 0 ? new Date(Date.now() + grace * 1000) : null,
      });
      await this.deps.audit.record(trx, webhookAudit(caller, 'webhook.secret_rotated', webhookId, { grace_period_seconds: grace }));
      return toWebhook(row, secret);
    });
  }

  private async lockVisible(trx: Knex.Transaction, caller: Caller, webhookId: string): Promise<EndpointRow> {
    const row = webhookId ? await lockEndpoint(trx, webhookId, caller.workspaceId) : undefined;
    if (!row) throw this.notFound(caller, webhookId);
    allow(caller, 'webhooks.manage');
    return row;
  }

  /** 404 for a webhook not in the caller's workspace; another workspace's is recorded as a probe (access.denied). */
  private notFound(caller: Caller, webhookId: string): Error {
    void recordForeignObjectProbe(this.deps.audit, caller, { type: 'webhook', id: webhookId }, () => webhookExists(this.deps.db, webhookId));
    return webhookNotFound();
  }
}

/** The audit record of a caller's action on an endpoint: ids and field names, never its secret. */
function webhookAudit(caller: Caller, action: string, webhookId: string, metadata?: Record<string, string | number>) {
  return callerAuditRecord(caller, action, { type: 'webhook', id: webhookId }, { metadata });
}

/** The names of the settings a change gives a new value (API names). */
function changedFields(current: EndpointRow, changes: EndpointChanges): string[] {
  const fields: string[] = [];
  if (changes.url !== undefined && changes.url !== current.url) fields.push('url');
  if (changes.events !== undefined && changes.events.join(',') !== current.events.join(',')) fields.push('events');
  if (changes.description !== undefined && changes.description !== current.description) fields.push('description');
  // Enabling a failing endpoint clears its failure clock: a change even when it was enabled.
  if (changes.enabled !== undefined && (changes.enabled !== current.enabled || (changes.enabled && current.failing_since !== null))) fields.push('enabled');
  return fields;
}

/** Known event types, each once; empty is every type. */
function parseEvents(events: string[]): string[] {
  const seen = new Set<string>();
  events.forEach((type, index) => {
    if (!isWebhookEventType(type)) {
      throw invalidArgument(`events[${index}]`, `Unknown event type ${JSON.stringify(type.slice(0, 100))}; known types: ${webhookEventTypes.join(', ')}.`);
    }
    seen.add(type);
  });
  return [...seen];
}

/** Empty clears the description. */
function parseDescription(description: string | undefined): string | null {
  if (description === undefined || description.trim() === '') return null;
  if ([...description].length > maxDescriptionLength) throw invalidArgument('description', `description may be at most ${maxDescriptionLength} characters.`);
  return description;
}
