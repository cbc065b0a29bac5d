import pg from 'pg';
import { round } from './latency.js';

/**
 * The Postgres backends serving the bench database (their CPU is the database's share of a run),
 * when Postgres runs on this host; none otherwise. Asks over `db` when given, else over a
 * connection of its own (then a failure means none).
 */
export async function postgresBackends(databaseUrl: string, db?: pg.Client): Promise<number[]> {
  if (!['127.0.0.1', 'localhost'].includes(new URL(databaseUrl).hostname)) return [];
  const sql = `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`;
  if (db) return (await db.query<{ pid: number }>(sql)).rows.map((row) => row.pid);
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    return (await client.query<{ pid: number }>(sql)).rows.map((row) => row.pid);
  } catch {
    return [];
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A client of the bench database for the bench's own reads. */
export async function connectDatabase(databaseUrl: string): Promise<pg.Client> {
  const db = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 3000 });
  await db.connect();
  return db;
}

/**
 * How long after a load the database counters are read: a backend that goes idle flushes its
 * statistics at most once a second and, idle, within 10 s (PGSTAT_IDLE_INTERVAL).
 */
export const statsFlushMs = 10_500;

export interface DatabaseActivity {
  transactions: number;
  inserted: number;
  updated: number;
  deleted: number;
  walBytes: number;
}

/** The bench database's counters (pg_stat_database), and the cluster's WAL position (other databases' writes included). */
export async function databaseActivity(db: pg.Client): Promise<DatabaseActivity> {
  const { rows } = await db.query<{ transactions: string; inserted: string; updated: string; deleted: string; wal: string }>(
    `SELECT (xact_commit + xact_rollback)::text AS transactions, tup_inserted::text AS inserted, tup_updated::text AS updated,
            tup_deleted::text AS deleted, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS wal
       FROM pg_stat_database WHERE datname = current_database()`,
  );
  const row = rows[0];
  return {
    transactions: Number(row.transactions),
    inserted: Number(row.inserted),
    updated: Number(row.updated),
    deleted: Number(row.deleted),
    walBytes: Number(row.wal),
  };
}

/** The change of one counter between two readings, per unit of work (2 decimals). */
export const activityPer = (before: DatabaseActivity, after: DatabaseActivity, key: keyof DatabaseActivity, units: number) =>
  round((after[key] - before[key]) / units, 2);
