import type { Knex } from '@switchboard/runtime/db';
import { type Db, microsOf, type PageQuery, pageClause } from '@switchboard/runtime/sql';

// API key records, with the spend of one month of their budget joined in.

export interface KeyRow {
  id: string;
  workspace_id: string;
  name: string;
  key_hash: string;
  hint: string;
  status: 'active' | 'revoked';
  monthly_spend_cap_usd: string | null;
  alert_webhook_url: string | null;
  alert_threshold_pct: number | null;
  alert_signing_secret_encrypted: string | null;
  routing_policy: string;
  created_by: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
  /** inference, read and/or manage, in that order. */
  scopes: string[];
  expires_at: Date | null;
  /** null: every model. */
  allowed_models: string[] | null;
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  max_concurrent: number | null;
  /** null: the key's own id (docs/api/keys.md#rotation). */
  budget_id: string | null;
  rotated_from: string | null;
  /** Ascending; null without an alert webhook. */
  alert_thresholds_pct: number[] | null;
}

/** Whose spend a key counts against: its own, or that of the key it was rotated from. */
export const budgetOf = (key: Pick<KeyRow, 'id' | 'budget_id'>): string => key.budget_id ?? key.id;

/** A key as its workspace sees it: the record plus the spend of the month asked for. */
export interface KeyWithSpendRow extends KeyRow {
  month_spend_usd: string;
  cursor_micros: string;
}

const keyColumns = `k.id, k.workspace_id, k.name, k.key_hash, k.hint, k.status, k.monthly_spend_cap_usd, k.alert_webhook_url,
  k.alert_threshold_pct, k.alert_signing_secret_encrypted, k.routing_policy, k.created_by, k.created_at, k.last_used_at, k.revoked_at,
  k.scopes, k.expires_at, k.allowed_models, k.requests_per_minute, k.tokens_per_minute, k.max_concurrent, k.budget_id, k.rotated_from,
  k.alert_thresholds_pct`;

// Month spend rows are keyed by the budget (docs/api/keys.md#rotation): a rotated key shows the spend of both credentials.
const withSpend = `${keyColumns}, COALESCE(s.spend_usd, 0)::text AS month_spend_usd, ${microsOf('k.created_at')} AS cursor_micros
  FROM api_keys k LEFT JOIN key_monthly_spend s ON s.key_id = COALESCE(k.budget_id, k.id) AND s.month = ?::date`;

/** What a new key is given; the settings left out take their defaults (all scopes, no expiry, every model, no limits). */
export interface NewKey {
  id: string;
  workspaceId: string;
  name: string;
  keyHash: string;
  hint: string;
  capUsd: string | null;
  routingPolicy: string;
  createdBy: string;
  scopes?: string[];
  expiresAt?: Date | null;
  allowedModels?: string[] | null;
  rateLimits?: RateLimitColumns;
}

export type RateLimitColumns = Pick<KeyRow, 'requests_per_minute' | 'tokens_per_minute' | 'max_concurrent'>;

export async function insertKey(db: Db, key: NewKey): Promise<void> {
  await db('api_keys').insert({
    id: key.id,
    workspace_id: key.workspaceId,
    name: key.name,
    key_hash: key.keyHash,
    hint: key.hint,
    monthly_spend_cap_usd: key.capUsd,
    routing_policy: key.routingPolicy,
    created_by: key.createdBy,
    ...(key.scopes ? { scopes: key.scopes } : {}),
    expires_at: key.expiresAt ?? null,
    allowed_models: key.allowedModels ?? null,
    ...key.rateLimits,
  });
}

/**
 * The key that replaces `old` (docs/api/keys.md#rotation): every setting of the old one (alert
 * secret included, still encrypted under the same purpose), the old one's budget, `rotated_from`
 * it; its day, week and total budgets are copied in `copyKeySpendLimits`.
 */
export async function insertRotatedKey(
  trx: Knex.Transaction,
  old: KeyRow,
  key: { id: string; keyHash: string; hint: string; createdBy: string },
): Promise<void> {
  await trx('api_keys').insert({
    id: key.id,
    workspace_id: old.workspace_id,
    name: old.name,
    key_hash: key.keyHash,
    hint: key.hint,
    monthly_spend_cap_usd: old.monthly_spend_cap_usd,
    alert_webhook_url: old.alert_webhook_url,
    alert_threshold_pct: old.alert_threshold_pct,
    alert_thresholds_pct: old.alert_thresholds_pct,
    alert_signing_secret_encrypted: old.alert_signing_secret_encrypted,
    routing_policy: old.routing_policy,
    created_by: key.createdBy,
    scopes: old.scopes,
    expires_at: old.expires_at,
    allowed_models: old.allowed_models,
    requests_per_minute: old.requests_per_minute,
    tokens_per_minute: old.tokens_per_minute,
    max_concurrent: old.max_concurrent,
    budget_id: budgetOf(old),
    rotated_from: old.id,
  });
}

/** Copies the budgets of key `from` to key `to` (a rotation). */
export async function copyKeySpendLimits(trx: Knex.Transaction, from: string, to: string): Promise<void> {
  await trx.raw('INSERT INTO spend_limits (subject, period, amount_usd) SELECT ?, period, amount_usd FROM spend_limits WHERE subject = ?', [to, from]);
}

/** Whether a key rotated from `keyId` is still active (not revoked). */
export async function hasActiveSuccessor(db: Db, keyId: string): Promise<boolean> {
  return (await db('api_keys').where({ rotated_from: keyId, status: 'active' }).first('id')) !== undefined;
}

/** When the key expires: null when never, undefined when there is no such key. */
export async function findKeyExpiry(db: Db, keyId: string): Promise<Date | null | undefined> {
  const row = await db('api_keys').where({ id: keyId }).first('expires_at');
  return row ? (row.expires_at as Date | null) : undefined;
}

/** The key `keyId` of `workspaceId` (never another workspace's) with its budget's spend of `month`. */
export async function findKey(db: Db, keyId: string, workspaceId: string, month: string): Promise<KeyWithSpendRow | undefined> {
  const { rows } = await db.raw<{ rows: KeyWithSpendRow[] }>(`SELECT ${withSpend} WHERE k.id = ? AND k.workspace_id = ?`, [month, keyId, workspaceId]);
  return rows[0];
}

/** Locks the key `keyId` of `workspaceId` for a change; undefined when there is none. */
export async function lockKey(trx: Knex.Transaction, keyId: string, workspaceId: string): Promise<KeyRow | undefined> {
  const { rows } = await trx.raw<{ rows: KeyRow[] }>(`SELECT ${keyColumns} FROM api_keys k WHERE k.id = ? AND k.workspace_id = ? FOR UPDATE`, [
    keyId,
    workspaceId,
  ]);
  return rows[0];
}

/** The workspace's keys, newest first; `limit + 1` rows (pageOf cuts). */
export async function listKeys(db: Db, workspaceId: string, status: string | undefined, month: string, page: PageQuery): Promise<KeyWithSpendRow[]> {
  const { cursor, bindings } = pageClause(page, 'k.created_at', 'k.id', [month, workspaceId, status ?? null, status ?? null]);
  const { rows } = await db.raw<{ rows: KeyWithSpendRow[] }>(
    `SELECT ${withSpend}
      WHERE k.workspace_id = ? AND (?::text IS NULL OR k.status = ?) ${cursor}
      ORDER BY k.created_at DESC, k.id DESC
      LIMIT ?`,
    bindings,
  );
  return rows;
}

/** The keys `userId` created, in every workspace, newest first; `limit + 1` rows (the data export). */
export async function listKeysCreatedBy(db: Db, userId: string, month: string, limit: number): Promise<KeyWithSpendRow[]> {
  const { rows } = await db.raw<{ rows: KeyWithSpendRow[] }>(`SELECT ${withSpend} WHERE k.created_by = ? ORDER BY k.created_at DESC, k.id DESC LIMIT ?`, [
    month,
    userId,
    limit + 1,
  ]);
  return rows;
}

export type KeyChanges = Partial<
  Pick<
    KeyRow,
    | 'name'
    | 'monthly_spend_cap_usd'
    | 'alert_webhook_url'
    | 'alert_threshold_pct'
    | 'alert_thresholds_pct'
    | 'alert_signing_secret_encrypted'
    | 'routing_policy'
    | 'scopes'
    | 'expires_at'
    | 'allowed_models'
    | 'requests_per_minute'
    | 'tokens_per_minute'
    | 'max_concurrent'
  > & { expired_event_at: null }
>;

export async function updateKey(trx: Knex.Transaction, keyId: string, changes: KeyChanges): Promise<void> {
  await trx('api_keys')
    .where({ id: keyId })
    .update({ ...changes, updated_at: trx.fn.now() });
}

/** What revokeKeys selects: one key, every active key of a workspace, or a user's (in one workspace or all). */
export type RevocationScope = { keyId: string } | { workspaceId: string; createdBy?: string } | { createdBy: string };

/** Revokes the active keys of `scope`; returns those it revoked (already revoked ones are left as they were). */
export async function revokeKeys(
  trx: Knex.Transaction,
  scope: RevocationScope,
  revocation: { by: string | null; reason: string },
): Promise<Array<{ id: string; workspace_id: string }>> {
  const query = trx('api_keys').where({ status: 'active' });
  if ('keyId' in scope) query.where({ id: scope.keyId });
  if ('workspaceId' in scope) query.where({ workspace_id: scope.workspaceId });
  if ('createdBy' in scope && scope.createdBy !== undefined) query.where({ created_by: scope.createdBy });
  return query
    .update({ status: 'revoked', revoked_at: trx.fn.now(), revoked_by: revocation.by, revoked_reason: revocation.reason, updated_at: trx.fn.now() })
    .returning(['id', 'workspace_id']);
}

/** What AuthorizeKey and AuthenticateKey decide on, for the key with `keyHash`. */
export interface KeyStateRow {
  id: string;
  key_hash: string;
  workspace_id: string;
  created_by: string;
  status: 'active' | 'revoked';
  monthly_spend_cap_usd: string | null;
  routing_policy: string;
  month_spend_usd: string;
  scopes: string[];
  expires_at: Date | null;
  budget_id: string;
}

const stateColumns = `k.id, k.key_hash, k.workspace_id, k.created_by, k.status, k.monthly_spend_cap_usd::text, k.routing_policy,
  COALESCE(s.spend_usd, 0)::text AS month_spend_usd, k.scopes, k.expires_at, COALESCE(k.budget_id, k.id) AS budget_id
  FROM api_keys k LEFT JOIN key_monthly_spend s ON s.key_id = COALESCE(k.budget_id, k.id) AND s.month = ?::date`;

export async function findKeyStateByHash(db: Db, keyHash: string, month: string): Promise<KeyStateRow | undefined> {
  const { rows } = await db.raw<{ rows: KeyStateRow[] }>(`SELECT ${stateColumns} WHERE k.key_hash = ?`, [month, keyHash]);
  return rows[0];
}

export async function findKeyStateById(db: Db, keyId: string, month: string): Promise<KeyStateRow | undefined> {
  const { rows } = await db.raw<{ rows: KeyStateRow[] }>(`SELECT ${stateColumns} WHERE k.id = ?`, [month, keyId]);
  return rows[0];
}

/** A key's standing as a data plane replica holds it (ListKeyStates). */
export interface VersionedKeyStateRow {
  id: string;
  key_hash: string;
  workspace_id: string;
  status: 'active' | 'revoked';
  monthly_spend_cap_usd: string | null;
  routing_policy: string;
  state_version: string;
  scopes: string[];
  expires_at: Date | null;
  allowed_models: string[] | null;
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  max_concurrent: number | null;
  budget_id: string;
  /** The day, week and total budgets (the month's is monthly_spend_cap_usd). */
  spend_limits: Array<{ period: string; amount_usd: string }>;
}

/** The keys whose state version is above `afterVersion`, in version order; `limit` rows. */
export async function listKeyStatesAfter(db: Db, afterVersion: string, limit: number): Promise<VersionedKeyStateRow[]> {
  const { rows } = await db.raw<{ rows: VersionedKeyStateRow[] }>(
    `SELECT k.id, k.key_hash, k.workspace_id, k.status, k.monthly_spend_cap_usd::text, k.routing_policy, k.state_version::text,
            k.scopes, k.expires_at, k.allowed_models, k.requests_per_minute, k.tokens_per_minute, k.max_concurrent,
            COALESCE(k.budget_id, k.id) AS budget_id,
            COALESCE((SELECT json_agg(json_build_object('period', l.period, 'amount_usd', l.amount_usd::text) ORDER BY l.period)
                        FROM spend_limits l WHERE l.subject = k.id AND l.period <> 'month'), '[]'::json) AS spend_limits
       FROM api_keys k WHERE k.state_version > ?::bigint ORDER BY k.state_version LIMIT ?`,
    [afterVersion, limit],
  );
  return rows;
}

/** The workspace and status of a key, for the billing service. */
export async function findKeyOwner(db: Db, keyId: string): Promise<{ id: string; workspace_id: string; status: string } | undefined> {
  return db('api_keys').where({ id: keyId }).first('id', 'workspace_id', 'status');
}

/** The alert webhook of a key, for the webhooks service. */
export async function findAlertWebhook(
  db: Db,
  keyId: string,
): Promise<Pick<KeyRow, 'alert_webhook_url' | 'alert_threshold_pct' | 'alert_thresholds_pct' | 'alert_signing_secret_encrypted'> | undefined> {
  return db('api_keys').where({ id: keyId }).first('alert_webhook_url', 'alert_threshold_pct', 'alert_thresholds_pct', 'alert_signing_secret_encrypted');
}

/**
 * Marks up to `limit` active keys whose expiry passed by `now` and that were not announced yet
 * (skipping those another replica is marking), and returns them: each gets its key.expired once.
 */
export async function markExpiredKeys(trx: Knex.Transaction, now: Date, limit: number): Promise<Array<{ id: string; workspace_id: string; expires_at: Date }>> {
  const { rows } = await trx.raw<{ rows: Array<{ id: string; workspace_id: string; expires_at: Date }> }>(
    `UPDATE api_keys SET expired_event_at = ?, updated_at = now()
       WHERE id IN (SELECT id FROM api_keys WHERE expires_at <= ? AND expired_event_at IS NULL AND status = 'active'
                     ORDER BY expires_at LIMIT ? FOR UPDATE SKIP LOCKED)
       RETURNING id, workspace_id, expires_at`,
    [now, now, limit],
  );
  return rows;
}

/**
 * Marks the key used now, unless it was marked within the last minute (docs/api/keys.md#the-key-record: at most one write a
 * minute per key, whatever the number of replicas).
 */
export async function touchKey(db: Db, keyId: string): Promise<void> {
  await db.raw(`UPDATE api_keys SET last_used_at = now() WHERE id = ? AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`, [keyId]);
}

/** The channel every replica listens on to keep its key states fresh (see key-states.ts). */
export const keyStateChannel = 'keys_state_changed';
