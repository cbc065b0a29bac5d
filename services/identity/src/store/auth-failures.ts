import type { Db } from './sql.js';

// Failure counters of the brute-force throttle.

/** Inserts a failure row; returns its id. */
export async function insertAuthFailure(db: Db, failure: { kind: string; scope: string; subject: string; at: Date }): Promise<string> {
  const [row] = (await db('auth_failures')
    .insert({ kind: failure.kind, scope: failure.scope, subject: failure.subject, created_at: failure.at })
    .returning(['id'])) as Array<{ id: string }>;
  return String(row.id);
}

export async function deleteAuthFailures(db: Db, ids: string[]): Promise<void> {
  if (ids.length > 0) await db('auth_failures').whereIn('id', ids).delete();
}

/** Failures of one counter since `since` but `excludeIds`, oldest first (at most `limit`). */
export async function recentAuthFailures(
  db: Db,
  counter: { kind: string; scope: string; subject: string },
  since: Date,
  limit: number,
  excludeIds: string[] = [],
): Promise<Date[]> {
  const rows = (await db('auth_failures')
    .select('created_at')
    .where({ kind: counter.kind, scope: counter.scope, subject: counter.subject })
    .where('created_at', '>', since)
    .whereNotIn('id', excludeIds)
    .orderBy('created_at', 'desc')
    .limit(limit)) as Array<{ created_at: Date }>;
  return rows.map((row) => row.created_at).reverse();
}

export async function clearAuthFailures(db: Db, counter: { kind: string; scope: string; subject: string }): Promise<void> {
  await db('auth_failures').where(counter).delete();
}

export async function pruneAuthFailures(db: Db, before: Date): Promise<number> {
  return db('auth_failures').where('created_at', '<', before).delete();
}
