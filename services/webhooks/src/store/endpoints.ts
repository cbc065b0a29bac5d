import type { Knex } from '@switchboard/runtime/db';
import { type Db, microsOf, type PageQuery, pageClause } from '@switchboard/runtime/sql';

// Webhook endpoints of workspaces, and the key alert targets that share their queue.

export interface EndpointRow {
  id: string;
  kind: 'webhook' | 'key_alert';
  workspace_id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  disabled_reason: string | null;
  disabled_at: Date | null;
  failing_since: Date | null;
  secret_encrypted: string | null;
  previous_secret_encrypted: string | null;
  previous_secret_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
  cursor_micros: string;
}

const endpointColumns = `id, kind, workspace_id, url, events, description, enabled, disabled_reason, disabled_at, failing_since,
  secret_encrypted, previous_secret_encrypted, previous_secret_expires_at, created_at, updated_at, ${microsOf('created_at')} AS cursor_micros`;

export async function insertEndpoint(
  db: Db,
  row: { id: string; workspaceId: string; url: string; events: string[]; description: string | null; secretEncrypted: string; createdBy: string },
): Promise<EndpointRow> {
  const { rows } = await db.raw<{ rows: EndpointRow[] }>(
    `INSERT INTO endpoints (id, workspace_id, url, events, description, secret_encrypted, created_by) VALUES (?, ?, ?, ?::text[], ?, ?, ?)
     RETURNING ${endpointColumns}`,
    [row.id, row.workspaceId, row.url, row.events, row.description, row.secretEncrypted, row.createdBy],
  );
  return rows[0];
}

/**
 * The number of webhook endpoints of `workspaceId` (key alert targets are the keys' and not
 * counted), once every other registration in the workspace has committed or rolled back: the
 * transaction holds the workspace's lock until it ends, so concurrent registrations are counted
 * one after the other and never pass the limit together.
 */
export async function lockAndCountEndpoints(trx: Knex.Transaction, workspaceId: string): Promise<number> {
  await trx.raw(`SELECT pg_advisory_xact_lock(hashtext('webhooks.endpoints:' || ?))`, [workspaceId]);
  const row = await trx('endpoints').where({ workspace_id: workspaceId, kind: 'webhook' }).first(trx.raw('count(*)::int AS count'));
  return Number(row?.count ?? 0);
}

/** The webhook `id` of `workspaceId` (never another workspace's, never a key alert target). */
export async function findEndpoint(db: Db, id: string, workspaceId: string): Promise<EndpointRow | undefined> {
  const { rows } = await db.raw<{ rows: EndpointRow[] }>(`SELECT ${endpointColumns} FROM endpoints WHERE id = ? AND workspace_id = ? AND kind = 'webhook'`, [
    id,
    workspaceId,
  ]);
  return rows[0];
}

/** Whether a webhook `id` exists in any workspace (the miss path of a lookup: a probe of another workspace's). */
export async function webhookExists(db: Db, id: string): Promise<boolean> {
  const row = await db('endpoints').where({ id, kind: 'webhook' }).first('id');
  return row !== undefined;
}

export async function lockEndpoint(trx: Knex.Transaction, id: string, workspaceId: string): Promise<EndpointRow | undefined> {
  const { rows } = await trx.raw<{ rows: EndpointRow[] }>(
    `SELECT ${endpointColumns} FROM endpoints WHERE id = ? AND workspace_id = ? AND kind = 'webhook' FOR UPDATE`,
    [id, workspaceId],
  );
  return rows[0];
}

export async function listEndpoints(db: Db, workspaceId: string, page: PageQuery): Promise<EndpointRow[]> {
  const { cursor, bindings } = pageClause(page, 'created_at', 'id', [workspaceId]);
  const { rows } = await db.raw<{ rows: EndpointRow[] }>(
    `SELECT ${endpointColumns} FROM endpoints WHERE workspace_id = ? AND kind = 'webhook' ${cursor} ORDER BY created_at DESC, id DESC LIMIT ?`,
    bindings,
  );
  return rows;
}

export interface EndpointChanges {
  url?: string;
  events?: string[];
  description?: string | null;
  /** true re-enables (and clears the failure clock); false disables by hand. */
  enabled?: boolean;
}

export async function updateEndpoint(trx: Knex.Transaction, id: string, changes: EndpointChanges): Promise<EndpointRow> {
  const sets: string[] = ['updated_at = now()'];
  const bindings: Knex.RawBinding[] = [];
  if (changes.url !== undefined) {
    sets.push('url = ?');
    bindings.push(changes.url);
  }
  if (changes.events !== undefined) {
    sets.push('events = ?::text[]');
    bindings.push(changes.events);
  }
  if (changes.description !== undefined) {
    sets.push('description = ?');
    bindings.push(changes.description);
  }
  if (changes.enabled === true) sets.push('enabled = true, disabled_reason = NULL, disabled_at = NULL');
  // A new URL is a new receiver, and re-enabling starts afresh: either clears the failure clock (set
  // once: Postgres refuses a column assigned twice).
  if (changes.url !== undefined || changes.enabled === true) sets.push('failing_since = NULL');
  if (changes.enabled === false) {
    // Disabling an endpoint that is already disabled keeps its reason (e.g. endpoint_gone).
    sets.push(`disabled_reason = CASE WHEN enabled THEN 'manual' ELSE disabled_reason END, disabled_at = CASE WHEN enabled THEN now() ELSE disabled_at END,
      enabled = false`);
  }
  const { rows } = await trx.raw<{ rows: EndpointRow[] }>(`UPDATE endpoints SET ${sets.join(', ')} WHERE id = ? RETURNING ${endpointColumns}`, [
    ...bindings,
    id,
  ]);
  return rows[0];
}

export async function replaceSecret(
  trx: Knex.Transaction,
  id: string,
  secrets: { current: string; previous: string | null; previousExpiresAt: Date | null },
): Promise<EndpointRow> {
  const { rows } = await trx.raw<{ rows: EndpointRow[] }>(
    `UPDATE endpoints SET secret_encrypted = ?, previous_secret_encrypted = ?, previous_secret_expires_at = ?, updated_at = now()
     WHERE id = ? RETURNING ${endpointColumns}`,
    [secrets.current, secrets.previous, secrets.previousExpiresAt, id],
  );
  return rows[0];
}

export async function deleteEndpoint(trx: Knex.Transaction, id: string): Promise<void> {
  await trx.raw('DELETE FROM endpoints WHERE id = ?', [id]);
}

/** Disables every enabled endpoint of a workspace (its organization is gone). */
export async function disableWorkspaceEndpoints(trx: Knex.Transaction, workspaceId: string, reason: string): Promise<number> {
  const result = await trx.raw(
    `UPDATE endpoints SET enabled = false, disabled_reason = ?, disabled_at = now(), updated_at = now() WHERE workspace_id = ? AND kind = 'webhook' AND enabled`,
    [reason, workspaceId],
  );
  return (result as { rowCount: number }).rowCount;
}

/** The key alert target of `keyId`, created on its first alert; its URL follows the newest alert. */
export async function upsertAlertTarget(trx: Knex.Transaction, target: { keyId: string; workspaceId: string; url: string }): Promise<void> {
  await trx.raw(
    `INSERT INTO endpoints (id, kind, workspace_id, url) VALUES (?, 'key_alert', ?, ?)
     ON CONFLICT (id) DO UPDATE SET url = excluded.url, updated_at = now() WHERE endpoints.kind = 'key_alert'`,
    [target.keyId, target.workspaceId, target.url],
  );
}

/** Locks the endpoints `ids` (in id order) against changes and deletion; returns the workspace of each. */
export async function lockEndpoints(trx: Knex.Transaction, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const { rows } = await trx.raw<{ rows: Array<{ id: string; workspace_id: string }> }>(
    'SELECT id, workspace_id FROM endpoints WHERE id = ANY (?::text[]) ORDER BY id FOR NO KEY UPDATE',
    [ids],
  );
  return new Map(rows.map((row) => [row.id, row.workspace_id]));
}

/** An endpoint whose failure clock a success stopped: when its run of failures began, and now. */
export interface ClearedClock {
  id: string;
  workspace_id: string;
  url: string;
  enabled: boolean;
  failing_since: Date;
  cleared_at: Date;
}

/**
 * A success stops the failure clocks of these endpoints (locked by the caller); returns the
 * endpoints that were failing, with when their failures began.
 */
export async function clearFailureClocks(trx: Knex.Transaction, ids: string[]): Promise<ClearedClock[]> {
  if (ids.length === 0) return [];
  const { rows } = await trx.raw<{ rows: ClearedClock[] }>(
    `UPDATE endpoints e SET failing_since = NULL
     FROM (SELECT id, failing_since FROM endpoints WHERE id = ANY (?::text[]) AND failing_since IS NOT NULL) AS was
     WHERE e.id = was.id
     RETURNING e.id, e.workspace_id, e.url, e.enabled, was.failing_since, now() AS cleared_at`,
    [ids],
  );
  return rows;
}

/**
 * A failed attempt on the endpoint's failure clock, under the endpoint's row lock: it starts the
 * clock, and after `disableAfterMs` of failures without a success (or at once with a 410)
 * disables the endpoint. Returns the row when this call disabled it.
 */
export async function recordEndpointFailure(
  trx: Knex.Transaction,
  id: string,
  failure: { gone: boolean; disableAfterMs: number },
): Promise<EndpointRow | undefined> {
  const { rows } = await trx.raw<{ rows: EndpointRow[] }>(
    `UPDATE endpoints SET
       failing_since = COALESCE(failing_since, now()),
       enabled = false,
       disabled_reason = CASE WHEN ? THEN 'endpoint_gone' ELSE 'failing' END,
       disabled_at = now(), updated_at = now()
     WHERE id = ? AND kind = 'webhook' AND enabled AND (? OR failing_since <= now() - ? * interval '1 millisecond')
     RETURNING ${endpointColumns}`,
    [failure.gone, id, failure.gone, failure.disableAfterMs],
  );
  if (rows[0]) return rows[0];
  await trx.raw('UPDATE endpoints SET failing_since = now() WHERE id = ? AND failing_since IS NULL', [id]);
  return undefined;
}

/**
 * Logs one manual call (test, redeliver, recover) of a locked endpoint in its sliding minute:
 * the times of the last minute are kept, this one added. Returns how many calls the minute
 * holds with this one, and in how many milliseconds enough of them have left the minute for
 * `limit` to allow this one (0 when it is allowed now); the caller rolls the log back with its
 * transaction when it refuses.
 */
export async function logManualCall(trx: Knex.Transaction, id: string, limit: number): Promise<{ retryInMs: number }> {
  const { rows } = await trx.raw<{ rows: Array<{ retry_in_ms: number }> }>(
    `UPDATE endpoints SET manual_calls = array(SELECT t FROM unnest(manual_calls || now()) AS t WHERE t > now() - interval '1 minute' ORDER BY t)
     WHERE id = ?
     RETURNING CASE WHEN cardinality(manual_calls) <= ? THEN 0
         ELSE ceil(extract(epoch FROM manual_calls[cardinality(manual_calls) - ?] + interval '1 minute' - now()) * 1000) END::float8 AS retry_in_ms`,
    [id, limit, limit],
  );
  return { retryInMs: Number(rows[0]?.retry_in_ms ?? 0) };
}

/** Endpoints by health: enabled and delivering, enabled but failing, disabled. */
export async function countByHealth(db: Db): Promise<{ healthy: number; failing: number; disabled: number }> {
  const row = await db('endpoints').first(
    db.raw('count(*) FILTER (WHERE enabled AND failing_since IS NULL)::int AS healthy'),
    db.raw('count(*) FILTER (WHERE enabled AND failing_since IS NOT NULL)::int AS failing'),
    db.raw('count(*) FILTER (WHERE NOT enabled)::int AS disabled'),
  );
  return { healthy: Number(row?.healthy ?? 0), failing: Number(row?.failing ?? 0), disabled: Number(row?.disabled ?? 0) };
}
