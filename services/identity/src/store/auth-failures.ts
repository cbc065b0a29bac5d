import type { Db } from '@switchboard/runtime/sql';

// Attempt counters of the brute-force throttle and the action limits: one row per attempt of
// a kind (password, second_factor, registration, …), per scope (account, ip, user) and subject.

/** A counter of one kind: its scope and subject, and how many of its latest rows matter. */
export interface Counter {
  scope: string;
  subject: string;
  limit: number;
}

/**
 * Records one attempt on each counter in one statement; returns the row ids. With `pendingUntil`
 * the rows count only until then unless settled (settleAttempts).
 */
export async function insertAttempts(
  db: Db,
  kind: string,
  counters: Array<Pick<Counter, 'scope' | 'subject'>>,
  at: Date,
  pendingUntil: Date | null = null,
): Promise<string[]> {
  if (counters.length === 0) return [];
  const rows = (await db('auth_failures')
    .insert(counters.map(({ scope, subject }) => ({ kind, scope, subject, created_at: at, pending_until: pendingUntil })))
    .returning(['id'])) as Array<{ id: string }>;
  return rows.map((row) => String(row.id));
}

/**
 * The latest attempts of each counter since `since` but `excludeIds` (at most its `limit`),
 * oldest first, by scope: one statement for every counter. Pending rows whose time ran out by
 * `now` are left out.
 */
export async function recentAttempts(db: Db, kind: string, counters: Counter[], since: Date, excludeIds: string[], now: Date): Promise<Map<string, Date[]>> {
  const found = new Map<string, Date[]>(counters.map(({ scope }) => [scope, []]));
  if (counters.length === 0) return found;
  const { rows } = (await db.raw(
    `WITH wanted AS (SELECT * FROM unnest(?::text[], ?::text[], ?::int[]) AS w(scope, subject, lim))
     SELECT scope, created_at FROM (
       SELECT a.scope, a.created_at, w.lim, row_number() OVER (PARTITION BY a.scope ORDER BY a.created_at DESC) AS rn
       FROM auth_failures a JOIN wanted w ON a.scope = w.scope AND a.subject = w.subject
       WHERE a.kind = ? AND a.created_at > ? AND a.id <> ALL(?::bigint[]) AND (a.pending_until IS NULL OR a.pending_until > ?)
     ) latest
     WHERE rn <= lim
     ORDER BY created_at`,
    [counters.map((c) => c.scope), counters.map((c) => c.subject), counters.map((c) => c.limit), kind, since, excludeIds, now],
  )) as { rows: Array<{ scope: string; created_at: Date }> };
  for (const row of rows) found.get(row.scope)?.push(row.created_at);
  return found;
}

/** Makes pending rows settled failures: they count for their whole window from now on. */
export async function settleAttempts(db: Db, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db('auth_failures').whereIn('id', ids).update({ pending_until: null });
}

/** Rows to delete: `ids`, and when given every row of `counter` (a counter of one kind). */
export interface AttemptDeletion {
  ids: string[];
  counter?: { kind: string; scope: string; subject: string };
}

/**
 * The DELETE of `deletion`: alone (deleteAttempts), or as a data-modifying CTE of a statement
 * that has other work to do (opening a session deletes a sign-in's attempts in the same round
 * trip and commit).
 */
export function attemptDeletionSql(deletion: AttemptDeletion): { sql: string; bindings: Array<string | string[] | null> } {
  const { counter } = deletion;
  return {
    sql: `DELETE FROM auth_failures WHERE id = ANY(?::bigint[]) OR (kind = ? AND scope = ? AND subject = ?)`,
    bindings: [deletion.ids, counter?.kind ?? null, counter?.scope ?? null, counter?.subject ?? null],
  };
}

/** Deletes the rows of `deletion`, in one statement. */
export async function deleteAttempts(db: Db, deletion: AttemptDeletion): Promise<void> {
  if (deletion.ids.length === 0 && !deletion.counter) return;
  const { sql, bindings } = attemptDeletionSql(deletion);
  await db.raw(sql, bindings);
}

export async function pruneAuthFailures(db: Db, before: Date): Promise<number> {
  return db('auth_failures').where('created_at', '<', before).delete();
}
