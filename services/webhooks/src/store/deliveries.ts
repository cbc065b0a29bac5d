import type { Knex } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import { type Db, inKeyOrder, microsOf, type PageQuery, pageClause } from '@switchboard/runtime/sql';

// Events, their deliveries (the queue) and the attempts of each delivery.

export interface DeliveryRow {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  status: 'pending' | 'succeeded' | 'failed' | 'exhausted';
  attempt_count: number;
  scheduled_attempts: number;
  next_trigger: Trigger;
  next_attempt_at: Date | null;
  leased_until: Date | null;
  created_at: Date;
  succeeded_at: Date | null;
  cursor_micros: string;
}

export type Trigger = 'event' | 'retry' | 'manual' | 'test';

export interface AttemptRow {
  id: string;
  delivery_id: string;
  url: string;
  status: 'success' | 'failed';
  response_status_code: number;
  error_class: string | null;
  duration_ms: number;
  response_body: string | null;
  trigger: Trigger;
  created_at: Date;
}

const deliveryColumns = `d.id, d.endpoint_id, d.event_id, d.event_type, d.status, d.attempt_count, d.scheduled_attempts, d.next_trigger,
  d.next_attempt_at, d.leased_until, d.created_at, d.succeeded_at, ${microsOf('d.created_at')} AS cursor_micros`;

/** An event as the queue stores it: its body is what every endpoint receives. */
export interface StoredEvent {
  id: string;
  type: string;
  workspaceId: string;
  occurredAt: string;
  body: string;
}

/**
 * Stores events' bodies once; returns the ids stored now. An event stored before has been fanned
 * out already (a redelivered message, or the JetStream copy of a published event).
 */
export async function insertEvents(trx: Knex.Transaction, unordered: StoredEvent[]): Promise<Set<string>> {
  if (unordered.length === 0) return new Set();
  // In id order: two batches holding one event (a message redelivered beside its copy) then wait
  // for each other instead of deadlocking.
  const events = inKeyOrder(unordered, (event) => event.id);
  const { rows } = await trx.raw<{ rows: Array<{ id: string }> }>(
    `INSERT INTO events (id, type, workspace_id, occurred_at, body)
     SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::timestamptz[], ?::text[])
     ON CONFLICT (id) DO NOTHING RETURNING id`,
    [events.map((e) => e.id), events.map((e) => e.type), events.map((e) => e.workspaceId), events.map((e) => e.occurredAt), events.map((e) => e.body)],
  );
  return new Set(rows.map((row) => row.id));
}

/** Stores one event's body; false when it was stored before (see insertEvents). */
export async function insertEvent(trx: Knex.Transaction, event: StoredEvent): Promise<boolean> {
  return (await insertEvents(trx, [event])).size === 1;
}

/**
 * One delivery of each event to every enabled endpoint of its workspace subscribed to its type
 * (an empty subscription is every type) but its `excludedEndpointId` (the endpoint an
 * operational event is about), in one statement for the whole batch. Endpoints disabled now
 * never get these events, even once re-enabled. Returns how many were queued.
 */
export async function fanOut(
  trx: Knex.Transaction,
  events: Array<Pick<StoredEvent, 'id' | 'type' | 'workspaceId'> & { excludedEndpointId?: string }>,
): Promise<number> {
  if (events.length === 0) return 0;
  const { rows: endpoints } = await trx.raw<{ rows: Array<{ id: string; workspace_id: string; events: string[] }> }>(
    `SELECT id, workspace_id, events FROM endpoints WHERE workspace_id = ANY (?::text[]) AND kind = 'webhook' AND enabled`,
    [[...new Set(events.map((event) => event.workspaceId))]],
  );
  if (endpoints.length === 0) return 0;
  const deliveries: Array<{ endpointId: string; eventId: string; eventType: string }> = [];
  for (const event of events) {
    for (const endpoint of endpoints) {
      if (endpoint.workspace_id !== event.workspaceId || endpoint.id === event.excludedEndpointId) continue;
      if (endpoint.events.length > 0 && !endpoint.events.includes(event.type)) continue;
      deliveries.push({ endpointId: endpoint.id, eventId: event.id, eventType: event.type });
    }
  }
  if (deliveries.length === 0) return 0;
  // In (endpoint, event) order, the unique key's: concurrent batches never deadlock on it.
  const ordered = inKeyOrder(deliveries, (d) => `${d.endpointId}\n${d.eventId}`);
  const result = await trx.raw(
    `INSERT INTO deliveries (id, endpoint_id, event_id, event_type, next_attempt_at)
     SELECT delivery_id, endpoint_id, event_id, event_type, now() FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) AS t(delivery_id, endpoint_id, event_id, event_type)
     ON CONFLICT ON CONSTRAINT deliveries_endpoint_event_key DO NOTHING`,
    [ordered.map(() => newId('dlv')), ordered.map((d) => d.endpointId), ordered.map((d) => d.eventId), ordered.map((d) => d.eventType)],
  );
  return (result as { rowCount: number }).rowCount;
}

/** A delivery of one event to one endpoint (a test, a key alert), due now. */
export async function insertDelivery(
  trx: Knex.Transaction,
  delivery: { endpointId: string; eventId: string; eventType: string; trigger: Trigger },
): Promise<string> {
  const id = newId('dlv');
  await trx.raw(
    `INSERT INTO deliveries (id, endpoint_id, event_id, event_type, next_trigger, next_attempt_at) VALUES (?, ?, ?, ?, ?, now())
     ON CONFLICT ON CONSTRAINT deliveries_endpoint_event_key DO NOTHING`,
    [id, delivery.endpointId, delivery.eventId, delivery.eventType, delivery.trigger],
  );
  return id;
}

/** What a sender needs for one claimed delivery. */
export interface ClaimedDelivery {
  id: string;
  endpoint_id: string;
  workspace_id: string;
  kind: 'webhook' | 'key_alert';
  url: string;
  secret_encrypted: string | null;
  previous_secret_encrypted: string | null;
  previous_secret_expires_at: Date | null;
  event_type: string;
  body: string;
  next_trigger: Trigger;
  scheduled_attempts: number;
  lease_token: string;
}

export interface ClaimOptions {
  /** At most this many rows. */
  limit: number;
  /** At most this many attempts in flight per endpoint, counting `busy`. */
  perEndpoint: number;
  /** At most this many attempts in flight per workspace, counting `busyWorkspaces`. */
  perWorkspace: number;
  /** Attempts this process already has in flight, by endpoint. */
  busy: Map<string, number>;
  /** Attempts this process already has in flight, by workspace. */
  busyWorkspaces: Map<string, number>;
  /** Endpoints not to claim for (open circuits). */
  excluded: string[];
  leaseMs: number;
}

/**
 * Leases up to `limit` due deliveries of enabled endpoints, round-robin across workspaces: each
 * workspace with due work gets its oldest row before any gets a second, its second before any
 * gets a third, and so on (docs/webhooks.md#fairness). No endpoint goes past `perEndpoint` nor
 * workspace past `perWorkspace`, counting what this process already sends; none of `excluded`
 * (open circuits). Key alert targets count in their workspace like its endpoints.
 *
 * One statement, driven by the due index: each endpoint reads at most the rows it has room for
 * (never more than its workspace has), so a workspace with thousands of due rows costs its
 * endpoints' few. SKIP LOCKED lets replicas claim side by side; the lease keeps a claimed row
 * from being claimed again until it ends (the sweeper frees the leases of a process that died).
 */
export async function claimDue(db: Db, options: ClaimOptions): Promise<ClaimedDelivery[]> {
  const token = newId('lease');
  const { rows } = await db.raw<{ rows: ClaimedDelivery[] }>(
    `WITH due AS (
       SELECT d.id, d.next_attempt_at, e.workspace_id, COALESCE(w.n, 0) AS workspace_busy
       FROM endpoints e
       LEFT JOIN unnest(?::text[], ?::int[]) AS b(id, n) ON b.id = e.id
       LEFT JOIN unnest(?::text[], ?::int[]) AS w(id, n) ON w.id = e.workspace_id
       CROSS JOIN LATERAL (
         SELECT d.id, d.next_attempt_at FROM deliveries d
         WHERE d.endpoint_id = e.id AND d.next_attempt_at <= now() AND d.leased_until IS NULL
         ORDER BY d.next_attempt_at LIMIT greatest(0, least(? - COALESCE(b.n, 0), ? - COALESCE(w.n, 0))) FOR UPDATE SKIP LOCKED
       ) d
       WHERE e.enabled AND e.id <> ALL (?::text[])
     ), ranked AS (
       SELECT id, next_attempt_at, workspace_busy, row_number() OVER (PARTITION BY workspace_id ORDER BY next_attempt_at, id) AS turn FROM due
     ), chosen AS (
       SELECT id FROM ranked WHERE workspace_busy + turn <= ? ORDER BY turn, next_attempt_at LIMIT ?
     )
     UPDATE deliveries d SET leased_until = now() + ? * interval '1 millisecond', lease_token = ?
     FROM chosen, endpoints e, events ev
     WHERE d.id = chosen.id AND e.id = d.endpoint_id AND ev.id = d.event_id
     RETURNING d.id, d.endpoint_id, e.workspace_id, e.kind, e.url, e.secret_encrypted, e.previous_secret_encrypted, e.previous_secret_expires_at,
       d.event_type, ev.body, d.next_trigger, d.scheduled_attempts, d.lease_token`,
    [
      [...options.busy.keys()],
      [...options.busy.values()],
      [...options.busyWorkspaces.keys()],
      [...options.busyWorkspaces.values()],
      options.perEndpoint,
      options.perWorkspace,
      options.excluded,
      options.perWorkspace,
      options.limit,
      options.leaseMs,
      token,
    ],
  );
  return rows;
}

type LockedDelivery = Pick<DeliveryRow, 'id' | 'event_id' | 'status' | 'scheduled_attempts'> & { lease_token: string | null };

/** Locks the deliveries `ids` that still exist, with their current lease. */
export async function lockDeliveries(trx: Knex.Transaction, ids: string[]): Promise<LockedDelivery[]> {
  const { rows } = await trx.raw<{ rows: LockedDelivery[] }>(
    'SELECT id, event_id, status, scheduled_attempts, lease_token FROM deliveries WHERE id = ANY (?::text[]) ORDER BY id FOR UPDATE',
    [ids],
  );
  return rows;
}

export async function insertAttempts(trx: Knex.Transaction, attempts: Array<Omit<AttemptRow, 'id' | 'created_at'>>): Promise<void> {
  if (attempts.length > 0) await trx('attempts').insert(attempts.map((attempt) => ({ id: newId('att'), ...attempt })));
}

/** The states after attempts; their leases end. */
export async function finishAttempts(
  trx: Knex.Transaction,
  updates: Array<{ id: string; status: DeliveryRow['status']; scheduledAttempts: number; nextAttemptAt: Date | null; succeeded: boolean }>,
): Promise<void> {
  if (updates.length === 0) return;
  await trx.raw(
    `UPDATE deliveries d SET status = v.status, attempt_count = d.attempt_count + 1, scheduled_attempts = v.scheduled, next_trigger = 'retry',
       next_attempt_at = v.next_at, succeeded_at = CASE WHEN v.succeeded THEN now() ELSE d.succeeded_at END, leased_until = NULL, lease_token = NULL
     FROM json_to_recordset(?::json) AS v(id text, status text, scheduled int, next_at timestamptz, succeeded boolean)
     WHERE d.id = v.id`,
    [JSON.stringify(updates.map((u) => ({ id: u.id, status: u.status, scheduled: u.scheduledAttempts, next_at: u.nextAttemptAt, succeeded: u.succeeded })))],
  );
}

/** Gives a lease back without an attempt (e.g. the target could not be resolved yet), due again at `at`. */
export async function releaseLease(db: Db, id: string, leaseToken: string, at: Date): Promise<void> {
  await db.raw('UPDATE deliveries SET leased_until = NULL, lease_token = NULL, next_attempt_at = ? WHERE id = ? AND lease_token = ?', [at, id, leaseToken]);
}

/** Ends a delivery without an attempt (its target is gone: a key alert whose webhook was removed). */
export async function dropDelivery(db: Db, id: string, leaseToken: string): Promise<void> {
  await db.raw(`UPDATE deliveries SET status = 'exhausted', next_attempt_at = NULL, leased_until = NULL, lease_token = NULL WHERE id = ? AND lease_token = ?`, [
    id,
    leaseToken,
  ]);
}

/** Frees the leases that ran out (their holder died or lost the database): the rows are due again. */
export async function sweepExpiredLeases(db: Db): Promise<number> {
  // Rows an outcome is being committed for are skipped (they are about to be released anyway).
  const result = await db.raw(
    `UPDATE deliveries SET leased_until = NULL, lease_token = NULL
     WHERE id IN (SELECT id FROM deliveries WHERE leased_until < now() ORDER BY leased_until LIMIT 1000 FOR UPDATE SKIP LOCKED)`,
  );
  return (result as { rowCount: number }).rowCount;
}

export async function findDelivery(db: Db, id: string, endpointId: string): Promise<DeliveryRow | undefined> {
  const { rows } = await db.raw<{ rows: DeliveryRow[] }>(`SELECT ${deliveryColumns} FROM deliveries d WHERE d.id = ? AND d.endpoint_id = ?`, [id, endpointId]);
  return rows[0];
}

export async function lockDelivery(trx: Knex.Transaction, id: string, endpointId: string): Promise<DeliveryRow | undefined> {
  const { rows } = await trx.raw<{ rows: DeliveryRow[] }>(`SELECT ${deliveryColumns} FROM deliveries d WHERE d.id = ? AND d.endpoint_id = ? FOR UPDATE`, [
    id,
    endpointId,
  ]);
  return rows[0];
}

export async function listDeliveries(db: Db, endpointId: string, status: string | undefined, page: PageQuery): Promise<DeliveryRow[]> {
  const leading: Knex.RawBinding[] = [endpointId];
  if (status) leading.push(status);
  const { cursor, bindings } = pageClause(page, 'd.created_at', 'd.id', leading);
  const { rows } = await db.raw<{ rows: DeliveryRow[] }>(
    `SELECT ${deliveryColumns} FROM deliveries d WHERE d.endpoint_id = ? ${status ? 'AND d.status = ?' : ''} ${cursor}
     ORDER BY d.created_at DESC, d.id DESC LIMIT ?`,
    bindings,
  );
  return rows;
}

/** The attempts of each delivery, oldest first. */
export async function attemptsOf(db: Db, deliveryIds: string[]): Promise<Map<string, AttemptRow[]>> {
  const byDelivery = new Map<string, AttemptRow[]>(deliveryIds.map((id) => [id, []]));
  if (deliveryIds.length === 0) return byDelivery;
  const { rows } = await db.raw<{ rows: AttemptRow[] }>(
    `SELECT id, delivery_id, url, status, response_status_code, error_class, duration_ms, response_body, trigger, created_at
     FROM attempts WHERE delivery_id = ANY (?::text[]) ORDER BY created_at, id`,
    [deliveryIds],
  );
  for (const row of rows) byDelivery.get(row.delivery_id)?.push(row);
  return byDelivery;
}

/** Queues one manual attempt of a delivery now; a delivered one stays `succeeded` (see `nextState`). */
export async function queueManualAttempt(trx: Knex.Transaction, id: string): Promise<DeliveryRow> {
  const { rows } = await trx.raw<{ rows: DeliveryRow[] }>(
    `UPDATE deliveries d SET next_trigger = 'manual', next_attempt_at = now(), status = CASE WHEN status IN ('failed', 'succeeded') THEN status ELSE 'pending' END
     WHERE d.id = ? RETURNING ${deliveryColumns}`,
    [id],
  );
  return rows[0];
}

/** Queues a manual attempt of every failed or exhausted delivery of the endpoint created since `since`, not in flight. */
export async function queueRecovery(trx: Knex.Transaction, endpointId: string, since: Date): Promise<number> {
  const result = await trx.raw(
    `UPDATE deliveries SET next_trigger = 'manual', next_attempt_at = now(), status = CASE WHEN status = 'failed' THEN 'failed' ELSE 'pending' END
     WHERE endpoint_id = ? AND created_at >= ? AND status IN ('failed', 'exhausted') AND leased_until IS NULL`,
    [endpointId, since],
  );
  return (result as { rowCount: number }).rowCount;
}

/** The queue now: deliveries due, scheduled for later and in flight. */
export async function queueDepth(db: Db): Promise<{ due: number; scheduled: number; inFlight: number }> {
  const row = await db('deliveries')
    .where((q) => q.whereNotNull('next_attempt_at').orWhereNotNull('leased_until'))
    .first(
      db.raw('count(*) FILTER (WHERE leased_until IS NULL AND next_attempt_at <= now())::int AS due'),
      db.raw('count(*) FILTER (WHERE leased_until IS NULL AND next_attempt_at > now())::int AS scheduled'),
      db.raw('count(*) FILTER (WHERE leased_until IS NOT NULL)::int AS in_flight'),
    );
  return { due: Number(row?.due ?? 0), scheduled: Number(row?.scheduled ?? 0), inFlight: Number(row?.in_flight ?? 0) };
}

/** How long the oldest due delivery has waited for its attempt, in seconds (0 when none): one row of the due index. */
export async function oldestDueAge(db: Db): Promise<number> {
  const row = await db('deliveries')
    .whereNotNull('next_attempt_at')
    .whereNull('leased_until')
    .where('next_attempt_at', '<=', db.fn.now())
    .first(db.raw('coalesce(extract(epoch FROM now() - min(next_attempt_at)), 0)::float8 AS age'));
  return Number(row?.age ?? 0);
}
