import type { MessageInitShape } from '@bufbuild/protobuf';
import type { Value } from '@bufbuild/protobuf/wkt';
import { Code, type HandlerContext } from '@connectrpc/connect';
import { KeyCreatedSchema, KeyRevokedSchema, KeyUpdatedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { KeySchema, ListKeysResponseSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { generateFullKey, hashKey, hintOf } from '@switchboard/runtime/api-key-format';
import { type AuditTrail, actorOf, callerAuditRecord, recordForeignObjectProbe } from '@switchboard/runtime/audit';
import { callerOf } from '@switchboard/runtime/call-context';
import type { WorkspaceCaller as Caller } from '@switchboard/runtime/caller';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { errorCatalogue } from '@switchboard/runtime/error-catalogue';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { newId, newSigningSecret } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import type { PgNotifier } from '@switchboard/runtime/pg-notifications';
import { authorize } from '@switchboard/runtime/policy';
import type { DataKeyRing } from '@switchboard/runtime/secrets';
import type { EventWriter } from '@switchboard/runtime/service';
import { parseHttpsUrl } from '@switchboard/runtime/urls';
import { parseSpendLimits } from './budgets.js';
import { type CurrentKeyRecord, currentKey } from './current-key.js';
import {
  keyScopes,
  parseAllowedModels,
  parseExpiresAt,
  parseGracePeriod,
  parseKeyName,
  parseRateLimits,
  parseRoutingPolicy,
  parseScopes,
  parseSpendCap,
  parseStatusFilter,
  parseThresholds,
  type RateLimitsInput,
} from './key-input.js';
import { keyNotFound, toKey } from './key-record.js';
import { monthOf } from './months.js';
import { rotateKey } from './rotation.js';
import { budgetLimits, budgetStatuses, setKeySpendLimits } from './store/budget-spend.js';
import {
  budgetOf,
  findKey,
  findKeyExpiry,
  findKeyOwner,
  hasActiveSuccessor,
  insertKey,
  type KeyChanges,
  type KeyRow,
  type KeyWithSpendRow,
  listKeys,
  listKeysCreatedBy,
  lockKey,
  type RateLimitColumns,
  revokeKeys,
  updateKey,
} from './store/keys.js';

/**
 * API keys as their workspace manages them (docs/api/keys.md): create, list, read, and the changes a
 * creator (any role) or an owner or admin (any key) may make. Every change locks the key row,
 * decides in this order: the key in the caller's workspace (404) → the permission table (403,
 * `keys.manage` with the key's creator as owner) → the input (400) → the scopes an API key may
 * grant (403 `insufficient_scope`) → the key still active (409); then writes the change and its
 * event in one transaction, and tells the key state caches once it committed.
 */

/** The purpose label of alert signing secrets under the data keys. */
export const alertSecretPurpose = 'keys.alert-signing-secret';

export type KeyRecord = MessageInitShape<typeof KeySchema>;

export interface KeysDeps {
  db: Knex;
  log: Logger;
  dataKeys: DataKeyRing;
  recordEvent: EventWriter;
  /** Where the audit records of key changes are written (docs/api/audit.md). */
  audit: AuditTrail;
  /** Tells every replica's key states (key-states.ts) that a key changed, once committed. */
  notifier: PgNotifier;
  clock?: Clock;
}

/** Which setting a change touches: the `change` of its key.updated event. */
type Change = 'name' | 'spend_cap' | 'spend_limits' | 'alert_webhook' | 'routing_policy' | 'settings';

/** What a change writes: the columns, the key record fields it changes (by JSON name), and more rows if any. */
interface Decision {
  change: Change;
  fields: string[];
  changes: KeyChanges;
  write?: (trx: Knex.Transaction) => Promise<void>;
}

const keyRevoked = () => apiError(Code.FailedPrecondition, 'key_revoked', 'This key is revoked; revoked keys cannot be changed.', { httpStatus: 409 });

const sameList = (a: readonly unknown[] | null, b: readonly unknown[] | null) =>
  a === b || (a !== null && b !== null && a.length === b.length && a.every((item, i) => item === b[i]));

export class Keys {
  constructor(private readonly deps: KeysDeps) {}

  private now(): Date {
    return (this.deps.clock ?? systemClock)();
  }

  /** A key row as its record, with its budgets where they stand now. */
  private async record(db: Knex, row: KeyWithSpendRow): Promise<KeyRecord> {
    return toKey(row, await budgetStatuses(db, { budgetId: budgetOf(row), keyId: row.id }, row.monthly_spend_cap_usd, this.now()));
  }

  async create(
    caller: Caller,
    input: {
      name: string;
      capUsd?: string;
      routingPolicy?: string;
      scopes?: Value;
      expiresAt?: Value;
      allowedModels?: Value;
      rateLimits?: Value;
      spendLimits: Array<{ period: string; amountUsd?: Value }>;
    },
  ): Promise<{ fullKey: string; key: KeyRecord }> {
    const name = parseKeyName(input.name);
    const capUsd = input.capUsd === undefined ? null : parseSpendCap(input.capUsd);
    const routingPolicy = parseRoutingPolicy(input.routingPolicy);
    const scopes = parseScopes(input.scopes) ?? keyScopes;
    const asked = parseExpiresAt(input.expiresAt, this.now());
    const allowedModels = parseAllowedModels(input.allowedModels) ?? null;
    const rateLimits = parseRateLimits(input.rateLimits);
    const spendLimits = parseSpendLimits(input.spendLimits);
    const month = spendLimits.find((limit) => limit.period === 'month');
    if (month && capUsd !== null)
      throw invalidArgument('monthly_spend_cap_usd', 'Send the monthly cap as monthly_spend_cap_usd or as the month entry of spend_limits, not both.');
    this.mayGrant(caller, scopes);
    const { db, recordEvent } = this.deps;
    // A key made by a key ends with it at the latest: without an expiry of its own, it gets the creator's.
    const ownEnd = await this.callerKeyEnd(caller);
    const expiresAt = asked === undefined ? (ownEnd ?? null) : asked;
    this.mayOutlive(ownEnd, expiresAt);
    const fullKey = generateFullKey();
    const keyId = newId('key');
    const hint = hintOf(fullKey);
    const requestId = caller.requestId;
    const row = await db.transaction(async (trx) => {
      await insertKey(trx, {
        id: keyId,
        workspaceId: caller.workspaceId,
        name,
        keyHash: hashKey(fullKey),
        hint,
        capUsd: month?.amountUsd ?? capUsd,
        routingPolicy,
        createdBy: caller.userId,
        scopes: [...scopes],
        expiresAt,
        allowedModels,
        rateLimits: rateLimits && rateLimitColumns(rateLimits),
      });
      // The cap given as monthly_spend_cap_usd is the month's limit: setKeySpendLimits writes the whole set.
      if (spendLimits.length > 0)
        await setKeySpendLimits(trx, keyId, month || capUsd === null ? spendLimits : [...spendLimits, { period: 'month', amountUsd: capUsd }]);
      await recordEvent(trx, KeyCreatedSchema, {
        workspaceId: caller.workspaceId,
        data: {
          keyId,
          workspaceId: caller.workspaceId,
          name,
          hint,
          createdBy: caller.userId,
          monthlySpendCapUsd: month?.amountUsd ?? capUsd ?? undefined,
          routingPolicy,
        },
        requestId,
      });
      await this.deps.audit.record(trx, keyAudit(caller, 'key.created', keyId));
      return findKey(trx, keyId, caller.workspaceId, this.month());
    });
    return { fullKey, key: await this.record(db, row!) };
  }

  async list(caller: Caller, input: { limit?: number; after?: string; status: string }): Promise<MessageInitShape<typeof ListKeysResponseSchema>> {
    const limit = parseLimit(input.limit);
    const after = decodeCursor(input.after);
    const status = parseStatusFilter(input.status);
    const rows = await listKeys(this.deps.db, caller.workspaceId, status, this.month(), { limit, after });
    const page = pageOf(rows, limit, (row) => ({ micros: row.cursor_micros, id: row.id }));
    return { data: await Promise.all(page.rows.map((row) => this.record(this.deps.db, row))), hasMore: page.hasMore, nextCursor: page.nextCursor };
  }

  async get(caller: Caller, keyId: string): Promise<KeyRecord> {
    const row = keyId ? await findKey(this.deps.db, keyId, caller.workspaceId, this.month()) : undefined;
    if (!row) throw this.notFound(caller, keyId);
    return this.record(this.deps.db, row);
  }

  /** GET /v1/key: the API key of the request (docs/api/keys.md#introspection). */
  current(ctx: HandlerContext): Promise<CurrentKeyRecord> {
    return currentKey(this.deps.db, ctx, this.now());
  }

  /** Whose a key is, for the billing service (any workspace: the caller is a component, not a user). */
  async owner(keyId: string): Promise<{ keyId: string; workspaceId: string; status: string }> {
    const row = keyId ? await findKeyOwner(this.deps.db, keyId) : undefined;
    if (!row) throw keyNotFound();
    return { keyId: row.id, workspaceId: row.workspace_id, status: row.status };
  }

  /**
   * The keys a user created, in every workspace (identity's data export, docs/api/identity.md#data-export):
   * their records as the workspace sees them, never a secret.
   */
  async exportCreatedBy(userId: string, limit: number): Promise<{ keys: Array<{ key: KeyRecord; workspaceId: string }>; truncated: boolean }> {
    if (userId === '') throw invalidArgument('user_id', 'user_id is required.');
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw invalidArgument('limit', 'limit must be from 1 to 10000.');
    const rows = await listKeysCreatedBy(this.deps.db, userId, this.month(), limit);
    const kept = rows.slice(0, limit);
    // One key at a time: a record reads its budgets, and a thousand at once would queue on the
    // pool ahead of the requests it serves. An export is a background job: it can wait.
    const keys: Array<{ key: KeyRecord; workspaceId: string }> = [];
    for (const row of kept) {
      const key = await this.record(this.deps.db, row);
      // A capability URL another member may have set since: not the exporting user's data.
      keys.push({ key: { ...key, alertWebhookUrl: undefined }, workspaceId: row.workspace_id });
    }
    return { keys, truncated: rows.length > limit };
  }

  /**
   * PATCH /v1/keys/{key_id}: each field sent replaces the setting (null clears it; scopes cannot
   * be cleared), each left out stays. Only what differs is written; a name alone is the `name`
   * change, anything else `settings`, both with the changed fields. Nothing different: the key
   * as it is, and no event.
   */
  async update(
    caller: Caller,
    keyId: string,
    input: { name?: string; scopes?: Value; expiresAt?: Value; allowedModels?: Value; rateLimits?: Value },
  ): Promise<KeyRecord> {
    const ownEnd = input.expiresAt === undefined ? undefined : await this.callerKeyEnd(caller);
    return this.change(caller, keyId, (key) => {
      const name = input.name === undefined ? undefined : parseKeyName(input.name);
      if (input.scopes?.kind.case === 'nullValue') throw invalidArgument('scopes', 'scopes cannot be null: send the scopes the key keeps (at least one).');
      const scopes = parseScopes(input.scopes);
      const expiresAt = parseExpiresAt(input.expiresAt, this.now());
      const allowedModels = parseAllowedModels(input.allowedModels);
      const rateLimits = parseRateLimits(input.rateLimits);
      if (scopes) this.mayGrant(caller, scopes);
      const changes: KeyChanges = {};
      const fields: string[] = [];
      if (name !== undefined && name !== key.name) {
        changes.name = name;
        fields.push('name');
      }
      if (scopes && !sameList(scopes, key.scopes)) {
        changes.scopes = scopes;
        fields.push('scopes');
      }
      if (expiresAt !== undefined && expiresAt?.getTime() !== key.expires_at?.getTime()) {
        // Giving a key more time is granting: only to a key whose scopes the caller has, never past the caller's own end.
        if (expiresAt === null || (key.expires_at !== null && expiresAt > key.expires_at)) {
          this.mayGrant(caller, key.scopes);
          this.mayOutlive(ownEnd, expiresAt);
        }
        // A new expiry is announced again when it passes.
        Object.assign(changes, { expires_at: expiresAt, expired_event_at: null });
        fields.push('expires_at');
      }
      if (allowedModels !== undefined && !sameList(allowedModels, key.allowed_models)) {
        changes.allowed_models = allowedModels;
        fields.push('allowed_models');
      }
      if (rateLimits) {
        const columns = rateLimitColumns(rateLimits);
        if (Object.entries(columns).some(([column, limit]) => key[column as keyof RateLimitColumns] !== limit)) {
          Object.assign(changes, columns);
          fields.push('rate_limits');
        }
      }
      if (fields.length === 0) return undefined;
      return { change: fields.length === 1 && fields[0] === 'name' ? 'name' : 'settings', fields, changes };
    });
  }

  /** Sets (exactly as given) or clears the cap: exactly one of a cap and `clear: true`. The cap it has already: no event. */
  setSpendCap(caller: Caller, keyId: string, input: { capUsd?: string; clear: boolean }): Promise<KeyRecord> {
    return this.change(caller, keyId, (key) => {
      if (input.clear && input.capUsd !== undefined) {
        throw invalidArgument('monthly_spend_cap_usd', 'Send either monthly_spend_cap_usd or clear: true, not both.');
      }
      // The cap is the month's entry of spend_limits: a new cap changes both fields, the same one neither.
      const decided = (cap: string | null): Decision | undefined =>
        cap === key.monthly_spend_cap_usd
          ? undefined
          : { change: 'spend_cap', fields: ['monthly_spend_cap_usd', 'spend_limits'], changes: { monthly_spend_cap_usd: cap } };
      if (input.clear) return decided(null);
      if (input.capUsd === undefined) throw invalidArgument('monthly_spend_cap_usd', 'Send monthly_spend_cap_usd (a decimal string) or clear: true.');
      return decided(parseSpendCap(input.capUsd));
    });
  }

  /** PUT …/spend-limits: replaces every budget of the key, its month's (the cap) included. The budgets it has already: no event. */
  setSpendLimits(caller: Caller, keyId: string, raw: Array<{ period: string; amountUsd?: Value }>): Promise<KeyRecord> {
    return this.change(caller, keyId, async (key, trx) => {
      const limits = parseSpendLimits(raw);
      const cap = limits.find((limit) => limit.period === 'month')?.amountUsd ?? null;
      // Both lists in period order, each amount as given: the same budgets again change nothing.
      const old = await budgetLimits(trx, { keyId, budgetId: key.budget_id ?? keyId }, key.monthly_spend_cap_usd);
      const same = old.length === limits.length && old.every((limit, i) => limit.period === limits[i]!.period && limit.amountUsd === limits[i]!.amountUsd);
      if (same) return undefined;
      return {
        change: 'spend_limits',
        fields: cap === key.monthly_spend_cap_usd ? ['spend_limits'] : ['spend_limits', 'monthly_spend_cap_usd'],
        changes: {},
        write: () => setKeySpendLimits(trx, keyId, limits),
      };
    });
  }

  /**
   * Sets the alert webhook. Every call issues a new signing secret, returned here once (the PUT
   * replaces the whole setting; the old secret stops signing).
   */
  async setAlertWebhook(
    caller: Caller,
    keyId: string,
    input: { url: string; thresholdPct?: number; thresholdsPct?: Value },
  ): Promise<KeyRecord & { signingSecret: string }> {
    const signingSecret = newSigningSecret();
    const key = await this.change(caller, keyId, () => {
      // The thresholds first: a value of the wrong JSON type is named before the URL is checked.
      const thresholds = parseThresholds(input.thresholdsPct, input.thresholdPct);
      const url = parseHttpsUrl(input.url, 'url');
      return {
        change: 'alert_webhook',
        fields: alertFields,
        changes: {
          alert_webhook_url: url,
          alert_threshold_pct: thresholds[0],
          alert_thresholds_pct: thresholds,
          alert_signing_secret_encrypted: this.deps.dataKeys.encrypt(signingSecret, alertSecretPurpose),
        },
      };
    });
    return { ...key, signingSecret };
  }

  deleteAlertWebhook(caller: Caller, keyId: string): Promise<KeyRecord> {
    return this.change(caller, keyId, () => ({
      change: 'alert_webhook',
      fields: alertFields,
      changes: { alert_webhook_url: null, alert_threshold_pct: null, alert_thresholds_pct: null, alert_signing_secret_encrypted: null },
    }));
  }

  setRoutingPolicy(caller: Caller, keyId: string, rawPolicy: string | undefined): Promise<KeyRecord> {
    return this.change(caller, keyId, () => ({
      change: 'routing_policy',
      fields: ['routing_policy'],
      changes: { routing_policy: parseRoutingPolicy(rawPolicy) },
    }));
  }

  /**
   * POST …/rotate (docs/api/keys.md#rotation): a new key with every setting of this one and its
   * budget; this one keeps working for the grace period. An expired key is refused like a revoked
   * one (409): there is nothing left to hand over.
   */
  async rotate(caller: Caller, keyId: string, rawGrace: Value | undefined): Promise<{ fullKey: string; key: KeyRecord; previous: KeyRecord }> {
    const { db } = this.deps;
    const now = this.now();
    const ownEnd = await this.callerKeyEnd(caller);
    const fullKey = generateFullKey();
    const newKeyId = newId('key');
    const rows = await db.transaction(async (trx) => {
      const old = await this.lockVisible(trx, caller, keyId);
      authorize(caller.ctx, 'keys.manage', { ownerId: old.created_by, workspaceId: caller.workspaceId });
      const graceSeconds = parseGracePeriod(rawGrace);
      this.mayGrant(caller, old.scopes);
      // The new key keeps the old one's expiry: a key may not hand out one that outlives it.
      this.mayOutlive(ownEnd, old.expires_at);
      if (old.status === 'revoked' || (old.expires_at !== null && old.expires_at <= now)) {
        throw apiError(Code.FailedPrecondition, 'key_revoked', 'This key is revoked or expired; it cannot be rotated.', { httpStatus: 409 });
      }
      // Its successor holds the credential now: a second rotation would make a key that dies with the grace period.
      if (await hasActiveSuccessor(trx, keyId)) {
        throw apiError(Code.FailedPrecondition, 'key_already_rotated', 'This key was rotated already; rotate the key that replaced it.', { httpStatus: 409 });
      }
      await rotateKey(trx, this.deps.recordEvent, {
        old,
        newKey: { id: newKeyId, keyHash: hashKey(fullKey), hint: hintOf(fullKey), createdBy: caller.userId },
        graceSeconds,
        now,
        requestId: caller.requestId,
      });
      await this.deps.audit.record(trx, keyAudit(caller, 'key.rotated', keyId, { new_key_id: newKeyId, grace_period_seconds: graceSeconds }));
      this.deps.notifier.afterCommit(trx, [`key:${keyId}`, `key:${newKeyId}`]);
      const month = this.month();
      return { key: await findKey(trx, newKeyId, caller.workspaceId, month), previous: await findKey(trx, keyId, caller.workspaceId, month) };
    });
    return { fullKey, key: await this.record(db, rows.key!), previous: await this.record(db, rows.previous!) };
  }

  /** Revokes the key (kept for audit); revoking a revoked key answers it as it is. */
  async revoke(caller: Caller, keyId: string): Promise<KeyRecord> {
    const { db, recordEvent } = this.deps;
    const requestId = caller.requestId;
    const { row } = await db.transaction(async (trx) => {
      const key = await this.lockVisible(trx, caller, keyId);
      authorize(caller.ctx, 'keys.manage', { ownerId: key.created_by, workspaceId: caller.workspaceId });
      const revoked = (await revokeKeys(trx, { keyId }, { by: caller.userId, reason: 'revoked' })).length === 1;
      if (revoked) {
        await recordEvent(trx, KeyRevokedSchema, {
          workspaceId: key.workspace_id,
          data: { keyId, workspaceId: key.workspace_id, revokedBy: caller.userId, reason: 'revoked' },
          requestId,
        });
        await this.deps.audit.record(trx, keyAudit(caller, 'key.revoked', keyId));
        this.deps.notifier.afterCommit(trx, [`key:${keyId}`]);
      }
      return { row: await findKey(trx, keyId, caller.workspaceId, this.month()) };
    });
    return this.record(db, row!);
  }

  private month(): string {
    return monthOf(this.now());
  }

  /** When the calling API key itself expires: undefined for a user's session or a key that never does. */
  private async callerKeyEnd(caller: Caller): Promise<Date | undefined> {
    const claims = callerOf(caller.ctx);
    if (claims.principalType !== 'key' || !claims.keyId) return undefined;
    return (await findKeyExpiry(this.deps.db, claims.keyId)) ?? undefined;
  }

  /**
   * An API key may not give a key more lifetime than it has itself (docs/api/keys.md#expiry): a key
   * that expires cannot make, extend or rotate one that lives longer (or forever), so an expiry
   * bounds everything done with the key. 403 on `expires_at`.
   */
  private mayOutlive(ownEnd: Date | undefined, expiresAt: Date | null): void {
    if (ownEnd === undefined || (expiresAt !== null && expiresAt <= ownEnd)) return;
    throw apiError(
      Code.PermissionDenied,
      'forbidden',
      `An API key cannot give a key an expiry later than its own (${ownEnd.toISOString()}); set expires_at at or before it, or use a user's session.`,
      { field: 'expires_at', metadata: { expires_at_limit: ownEnd.toISOString() } },
    );
  }

  /**
   * An API key may grant only scopes it has itself (docs/api/keys.md#scopes): a key creating,
   * rotating or re-scoping a key is refused the first scope it lacks, with an audit line. A key
   * whose mesh token carries no scopes has none (fail closed). A user's session may grant any.
   */
  private mayGrant(caller: Caller, scopes: readonly string[]): void {
    const claims = callerOf(caller.ctx);
    if (claims.principalType !== 'key') return;
    const own = claims.scopes ?? [];
    const missing = scopes.find((scope) => !own.includes(scope));
    if (missing === undefined) return;
    const { code } = errorCatalogue.insufficientScope;
    // A refusal changes nothing: recorded alone (its audit line with it), never waited on inside the change's transaction.
    const method = caller.ctx.method;
    void this.deps.audit.recordAlone({
      action: 'access.denied',
      outcome: 'denied',
      actor: actorOf(caller),
      target: method ? { type: 'rpc', id: `${method.parent.typeName}/${method.name}` } : undefined,
      workspaceId: caller.workspaceId,
      requestId: caller.requestId,
      subjectUserId: caller.userId,
      metadata: { reason: code, required_scope: missing },
    });
    throw apiError(Code.PermissionDenied, code, `This API key cannot grant the scope ${missing}: it does not have it.`, {
      metadata: { required_scope: missing },
    });
  }

  private async lockVisible(trx: Knex.Transaction, caller: Caller, keyId: string): Promise<KeyRow> {
    const key = keyId ? await lockKey(trx, keyId, caller.workspaceId) : undefined;
    if (!key) throw this.notFound(caller, keyId);
    return key;
  }

  /** 404 for a key not in the caller's workspace; another workspace's key is recorded as a probe (access.denied). */
  private notFound(caller: Caller, keyId: string): Error {
    void recordForeignObjectProbe(this.deps.audit, caller, { type: 'api_key', id: keyId }, async () => (await findKeyOwner(this.deps.db, keyId)) !== undefined);
    return keyNotFound();
  }

  /** A change of one key, in the order of the class comment; `decide` answers undefined when nothing differs. */
  private async change(
    caller: Caller,
    keyId: string,
    decide: (key: KeyRow, trx: Knex.Transaction) => Decision | undefined | Promise<Decision | undefined>,
  ): Promise<KeyRecord> {
    const { db, recordEvent } = this.deps;
    const { row } = await db.transaction(async (trx) => {
      const key = await this.lockVisible(trx, caller, keyId);
      authorize(caller.ctx, 'keys.manage', { ownerId: key.created_by, workspaceId: caller.workspaceId });
      const decision = await decide(key, trx);
      if (key.status === 'revoked') throw keyRevoked();
      if (decision) {
        await updateKey(trx, keyId, decision.changes);
        await decision.write?.(trx);
        await recordEvent(trx, KeyUpdatedSchema, {
          workspaceId: key.workspace_id,
          data: { keyId, workspaceId: key.workspace_id, change: decision.change, changedFields: decision.fields },
          requestId: caller.requestId,
        });
        await this.deps.audit.record(trx, changeAudit(caller, keyId, decision));
        this.deps.notifier.afterCommit(trx, [`key:${keyId}`]);
      }
      return { row: await findKey(trx, keyId, caller.workspaceId, this.month()) };
    });
    return this.record(db, row!);
  }
}

/** The audit record of a caller's action on a key (docs/api/audit.md): never the key itself, its id. */
function keyAudit(caller: Caller, action: string, keyId: string, metadata?: Record<string, string | number>) {
  return callerAuditRecord(caller, action, { type: 'api_key', id: keyId }, { metadata });
}

/**
 * A key's spend limits (the cap is the month's limit) are `spend_limits.updated`; any other change
 * `key.updated`; both name the fields changed (names only, comma-separated: metadata is flat).
 */
function changeAudit(caller: Caller, keyId: string, decision: Decision) {
  const budgets = decision.change === 'spend_limits' || decision.change === 'spend_cap';
  return keyAudit(caller, budgets ? 'spend_limits.updated' : 'key.updated', keyId, { change: decision.change, changed_fields: decision.fields.join(',') });
}

/** The key record fields of the alert webhook setting. */
const alertFields = ['alert_webhook_url', 'alert_threshold_pct', 'alert_thresholds_pct'];

function rateLimitColumns(limits: RateLimitsInput): RateLimitColumns {
  return { requests_per_minute: limits.requestsPerMinute, tokens_per_minute: limits.tokensPerMinute, max_concurrent: limits.maxConcurrent };
}
