import type { MessageInitShape } from '@bufbuild/protobuf';
import { Code } from '@connectrpc/connect';
import { KeyCreatedSchema, KeyRevokedSchema, KeyUpdatedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { KeySchema, ListKeysResponseSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { generateFullKey, hashKey, hintOf } from '@switchboard/runtime/api-key-format';
import { auditCallerSuccess } from '@switchboard/runtime/audit';
import type { WorkspaceCaller as Caller } from '@switchboard/runtime/caller';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { newId, newSigningSecret } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import type { PgNotifier } from '@switchboard/runtime/pg-notifications';
import { authorize } from '@switchboard/runtime/policy';
import type { DataKeyRing } from '@switchboard/runtime/secrets';
import type { EventWriter } from '@switchboard/runtime/service';
import { parseHttpsUrl } from '@switchboard/runtime/urls';
import { parseKeyName, parseRoutingPolicy, parseSpendCap, parseStatusFilter, parseThresholdPct } from './key-input.js';
import { toKey } from './key-record.js';
import { monthOf } from './months.js';
import { findKey, findKeyOwner, insertKey, type KeyChanges, type KeyRow, listKeys, lockKey, revokeKeys, updateKey } from './store/keys.js';

/**
 * API keys as their workspace manages them (docs/api/keys.md): create, list, read, and the changes a
 * creator (any role) or an owner or admin (any key) may make. Every change locks the key row,
 * decides in this order: the key in the caller's workspace (404) → the permission table (403,
 * `keys.manage` with the key's creator as owner) → the input (400) → the key still active (409);
 * then writes the change and its event in one transaction, and tells the key state caches once
 * it committed.
 */

/** The purpose label of alert signing secrets under the data keys. */
export const alertSecretPurpose = 'keys.alert-signing-secret';

export type KeyRecord = MessageInitShape<typeof KeySchema>;

/** Another workspace's key is a 404 like a key that does not exist. */
const keyNotFound = () => apiError(Code.NotFound, 'key_not_found', 'No such key in this workspace.');

export interface KeysDeps {
  db: Knex;
  log: Logger;
  dataKeys: DataKeyRing;
  recordEvent: EventWriter;
  /** Tells every replica's key states (key-states.ts) that a key changed, once committed. */
  notifier: PgNotifier;
  clock?: Clock;
}

/** Which setting a change touches: the `change` of its key.updated event. */
type Change = 'name' | 'spend_cap' | 'alert_webhook' | 'routing_policy';

const keyRevoked = () => apiError(Code.FailedPrecondition, 'key_revoked', 'This key is revoked; revoked keys cannot be changed.', { httpStatus: 409 });

export class Keys {
  constructor(private readonly deps: KeysDeps) {}

  private month(): string {
    return monthOf((this.deps.clock ?? systemClock)());
  }

  async create(caller: Caller, input: { name: string; capUsd?: string; routingPolicy?: string }): Promise<{ fullKey: string; key: KeyRecord }> {
    const name = parseKeyName(input.name);
    const capUsd = input.capUsd === undefined ? null : parseSpendCap(input.capUsd);
    const routingPolicy = parseRoutingPolicy(input.routingPolicy);
    const { db, recordEvent } = this.deps;
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
        capUsd,
        routingPolicy,
        createdBy: caller.userId,
      });
      await recordEvent(trx, KeyCreatedSchema, {
        workspaceId: caller.workspaceId,
        data: {
          keyId,
          workspaceId: caller.workspaceId,
          name,
          hint,
          createdBy: caller.userId,
          monthlySpendCapUsd: capUsd ?? undefined,
          routingPolicy,
        },
        requestId,
      });
      return findKey(trx, keyId, caller.workspaceId, this.month());
    });
    this.audit(caller, 'api_key.created', keyId);
    return { fullKey, key: toKey(row!) };
  }

  async list(caller: Caller, input: { limit?: number; after?: string; status: string }): Promise<MessageInitShape<typeof ListKeysResponseSchema>> {
    const limit = parseLimit(input.limit);
    const after = decodeCursor(input.after);
    const status = parseStatusFilter(input.status);
    const rows = await listKeys(this.deps.db, caller.workspaceId, status, this.month(), { limit, after });
    const page = pageOf(rows, limit, (row) => ({ micros: row.cursor_micros, id: row.id }));
    return { data: page.rows.map(toKey), hasMore: page.hasMore, nextCursor: page.nextCursor };
  }

  async get(caller: Caller, keyId: string): Promise<KeyRecord> {
    const row = keyId ? await findKey(this.deps.db, keyId, caller.workspaceId, this.month()) : undefined;
    if (!row) throw keyNotFound();
    return toKey(row);
  }

  /** Whose a key is, for the billing service (any workspace: the caller is a component, not a user). */
  async owner(keyId: string): Promise<{ keyId: string; workspaceId: string; status: string }> {
    const row = keyId ? await findKeyOwner(this.deps.db, keyId) : undefined;
    if (!row) throw keyNotFound();
    return { keyId: row.id, workspaceId: row.workspace_id, status: row.status };
  }

  rename(caller: Caller, keyId: string, rawName: string): Promise<KeyRecord> {
    return this.change(caller, keyId, 'name', () => ({ name: parseKeyName(rawName) }));
  }

  /** Sets (exactly as given) or clears the cap: exactly one of a cap and `clear: true`. */
  setSpendCap(caller: Caller, keyId: string, input: { capUsd?: string; clear: boolean }): Promise<KeyRecord> {
    return this.change(caller, keyId, 'spend_cap', () => {
      if (input.clear && input.capUsd !== undefined) {
        throw invalidArgument('monthly_spend_cap_usd', 'Send either monthly_spend_cap_usd or clear: true, not both.');
      }
      if (input.clear) return { monthly_spend_cap_usd: null };
      if (input.capUsd === undefined) throw invalidArgument('monthly_spend_cap_usd', 'Send monthly_spend_cap_usd (a decimal string) or clear: true.');
      return { monthly_spend_cap_usd: parseSpendCap(input.capUsd) };
    });
  }

  /**
   * Sets the alert webhook. Every call issues a new signing secret, returned here once (the PUT
   * replaces the whole setting; the old secret stops signing).
   */
  async setAlertWebhook(caller: Caller, keyId: string, input: { url: string; thresholdPct?: number }): Promise<KeyRecord & { signingSecret: string }> {
    const signingSecret = newSigningSecret();
    const key = await this.change(caller, keyId, 'alert_webhook', () => ({
      alert_webhook_url: parseHttpsUrl(input.url, 'url'),
      alert_threshold_pct: parseThresholdPct(input.thresholdPct),
      alert_signing_secret_encrypted: this.deps.dataKeys.encrypt(signingSecret, alertSecretPurpose),
    }));
    return { ...key, signingSecret };
  }

  deleteAlertWebhook(caller: Caller, keyId: string): Promise<KeyRecord> {
    return this.change(caller, keyId, 'alert_webhook', () => ({ alert_webhook_url: null, alert_threshold_pct: null, alert_signing_secret_encrypted: null }));
  }

  setRoutingPolicy(caller: Caller, keyId: string, rawPolicy: string | undefined): Promise<KeyRecord> {
    return this.change(caller, keyId, 'routing_policy', () => ({ routing_policy: parseRoutingPolicy(rawPolicy) }));
  }

  /** Revokes the key (kept for audit); revoking a revoked key answers it as it is. */
  async revoke(caller: Caller, keyId: string): Promise<KeyRecord> {
    const { db, recordEvent } = this.deps;
    const requestId = caller.requestId;
    const { row, revoked } = await db.transaction(async (trx) => {
      const key = await this.lockVisible(trx, caller, keyId);
      authorize(caller.ctx, 'keys.manage', { ownerId: key.created_by, workspaceId: caller.workspaceId });
      const revoked = (await revokeKeys(trx, { keyId }, { by: caller.userId, reason: 'revoked' })).length === 1;
      if (revoked) {
        await recordEvent(trx, KeyRevokedSchema, {
          workspaceId: key.workspace_id,
          data: { keyId, workspaceId: key.workspace_id, revokedBy: caller.userId, reason: 'revoked' },
          requestId,
        });
        this.deps.notifier.afterCommit(trx, [`key:${keyId}`]);
      }
      return { row: await findKey(trx, keyId, caller.workspaceId, this.month()), revoked };
    });
    if (revoked) this.audit(caller, 'api_key.revoked', keyId);
    return toKey(row!);
  }

  private async lockVisible(trx: Knex.Transaction, caller: Caller, keyId: string): Promise<KeyRow> {
    const key = keyId ? await lockKey(trx, keyId, caller.workspaceId) : undefined;
    if (!key) throw keyNotFound();
    return key;
  }

  private async change(caller: Caller, keyId: string, change: Change, decide: (key: KeyRow) => KeyChanges): Promise<KeyRecord> {
    const { db, recordEvent } = this.deps;
    const row = await db.transaction(async (trx) => {
      const key = await this.lockVisible(trx, caller, keyId);
      authorize(caller.ctx, 'keys.manage', { ownerId: key.created_by, workspaceId: caller.workspaceId });
      const changes = decide(key);
      if (key.status === 'revoked') throw keyRevoked();
      await updateKey(trx, keyId, changes);
      await recordEvent(trx, KeyUpdatedSchema, {
        workspaceId: key.workspace_id,
        data: { keyId, workspaceId: key.workspace_id, change },
        requestId: caller.requestId,
      });
      this.deps.notifier.afterCommit(trx, [`key:${keyId}`]);
      return findKey(trx, keyId, caller.workspaceId, this.month());
    });
    if (change === 'spend_cap' || change === 'alert_webhook') this.audit(caller, `api_key.${change}_changed`, keyId);
    return toKey(row!);
  }

  private audit(caller: Caller, event: string, keyId: string): void {
    auditCallerSuccess(this.deps.log, caller, event, { key_id: keyId, workspace_id: caller.workspaceId });
  }
}
