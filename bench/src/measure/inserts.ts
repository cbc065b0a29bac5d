import pg from 'pg';
import { latencyOf } from './latency.js';
import { closedLoop } from './loop.js';

export interface InsertLoopResult {
  concurrency: number;
  inserts: number;
  seconds: number;
  insertsPerSecond: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  errors: number;
  server: { version: string; synchronousCommit: string };
}

/** The settings of the raw insert loop, the same in every bench, so they all compare with the same reference. */
export const insertLoop = { concurrency: 16, maxInserts: 200_000, maxSeconds: 5, warmupInserts: 1_000 };

/**
 * The raw Postgres reference: single-row INSERTs (each its own autocommit transaction, like a
 * request that writes one row) from `concurrency` workers over one pg Pool, until `maxInserts`
 * rows or `maxSeconds`, whichever comes first. The table lives in its own schema, dropped after.
 */
export async function runInsertLoop(options: {
  databaseUrl: string;
  concurrency: number;
  maxInserts: number;
  maxSeconds: number;
  warmupInserts: number;
}): Promise<InsertLoopResult> {
  const { concurrency, maxInserts, maxSeconds } = options;
  const schema = `bench_probe_${process.pid}`;
  const table = `"${schema}".inserts`;
  const pool = new pg.Pool({ connectionString: options.databaseUrl, max: concurrency, connectionTimeoutMillis: 3000 });
  try {
    const settings = await pool.query<{ version: string; synchronous_commit: string }>(
      `SELECT current_setting('server_version') AS version, current_setting('synchronous_commit') AS synchronous_commit`,
    );
    const server = { version: settings.rows[0].version, synchronousCommit: settings.rows[0].synchronous_commit };
    await pool.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await pool.query(
      `CREATE TABLE ${table} (id bigserial PRIMARY KEY, account_id text NOT NULL, payload text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
    );
    const sql = `INSERT INTO ${table} (account_id, payload) VALUES ($1, $2)`;
    const payload = 'x'.repeat(100);

    const loop = async (budget: number, latencies?: Float64Array) => {
      let done = 0;
      let errors = 0;
      const seconds = await closedLoop(concurrency, { maxCalls: budget, seconds: maxSeconds }, async (_, w) => {
        const started = performance.now();
        try {
          await pool.query(sql, [`acct_${w}`, payload]);
          if (latencies) latencies[done] = performance.now() - started;
          done += 1;
        } catch {
          errors += 1;
        }
      });
      return { done, errors, seconds };
    };

    await loop(options.warmupInserts);
    const latencies = new Float64Array(maxInserts);
    const { done, errors, seconds } = await loop(maxInserts, latencies);
    return {
      concurrency,
      inserts: done,
      seconds: Math.round(seconds * 100) / 100,
      insertsPerSecond: Math.round(done / seconds),
      latencyMs: latencyOf(latencies.subarray(0, done)),
      errors,
      server,
    };
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await pool.end();
  }
}

/** The raw insert loop of every bench, on the bench database, with a progress line (`note` after it). */
export function measureInserts(databaseUrl: string, progress: (message: string) => void, note = ''): Promise<InsertLoopResult> {
  progress(`raw Postgres insert loop (${insertLoop.maxInserts} rows or ${insertLoop.maxSeconds} s, concurrency ${insertLoop.concurrency})${note}`);
  return runInsertLoop({ databaseUrl, ...insertLoop });
}

/** The insert loop's row label in a bench's table. */
export const insertsLabel = (inserts: InsertLoopResult) => `raw Postgres INSERT (autocommit, ${inserts.concurrency} at a time)`;

/** The line under a table that compares with the insert loop: which Postgres it ran on. */
export const postgresServerLine = (inserts: InsertLoopResult) => `Postgres ${inserts.server.version}, synchronous_commit=${inserts.server.synchronousCommit}`;
