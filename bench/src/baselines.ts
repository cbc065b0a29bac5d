import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

/** The single-process baseline server (baseline-server.ts) running as a child process. */
export interface BaselineServer {
  url: string;
  pid: number;
  /** Everything it printed (errors only: it does not log requests). */
  output(): string;
  exited(): boolean;
  stop(): Promise<void>;
}

const startTimeoutMs = 15_000;

export async function startBaselineServer(options: { databaseUrl: string; jwksUrl: string; poolMax: number }): Promise<BaselineServer> {
  const entry = fileURLToPath(new URL('./baseline-server.js', import.meta.url));
  const child: ChildProcess = fork(entry, [], {
    env: {
      ...process.env,
      BASELINE_DATABASE_URL: options.databaseUrl,
      BASELINE_JWKS_URL: options.jwksUrl,
      BASELINE_POOL_MAX: String(options.poolMax),
      NODE_ENV: 'production',
    },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const lines: string[] = [];
  for (const stream of [child.stdout!, child.stderr!]) {
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => lines.push(chunk));
  }
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  };
  try {
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the baseline server did not start within ${startTimeoutMs} ms`)), startTimeoutMs);
      child.on('message', (message: { type?: string; port?: number; message?: string }) => {
        if (message.type === 'ready' && message.port) {
          clearTimeout(timer);
          resolve(message.port);
        } else if (message.type === 'error') {
          clearTimeout(timer);
          reject(new Error(`the baseline server failed: ${message.message}`));
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`the baseline server exited with code ${code}: ${lines.join('').slice(-2000)}`));
      });
    });
    return {
      url: `http://127.0.0.1:${port}`,
      pid: child.pid!,
      output: () => lines.join(''),
      exited: () => child.exitCode !== null || child.signalCode !== null,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

export interface InsertLoopResult {
  concurrency: number;
  inserts: number;
  seconds: number;
  insertsPerSecond: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  errors: number;
  server: { version: string; synchronousCommit: string };
}

/** The `p`th percentile of ascending `sorted` values, rounded to 2 decimals (0 when empty). */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return Math.round(sorted[Math.max(0, index)] * 100) / 100;
}

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

    const loop = async (budget: number, seconds: number, latencies?: Float64Array) => {
      let issued = 0;
      let done = 0;
      let errors = 0;
      const deadline = performance.now() + seconds * 1000;
      const worker = async (w: number) => {
        while (issued < budget && performance.now() < deadline) {
          issued += 1;
          const started = performance.now();
          try {
            await pool.query(sql, [`acct_${w}`, payload]);
            if (latencies) latencies[done] = performance.now() - started;
            done += 1;
          } catch {
            errors += 1;
          }
        }
      };
      const started = performance.now();
      await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
      return { done, errors, seconds: (performance.now() - started) / 1000 };
    };

    await loop(options.warmupInserts, maxSeconds);
    const latencies = new Float64Array(maxInserts);
    const { done, errors, seconds } = await loop(maxInserts, maxSeconds, latencies);
    const sorted = latencies.slice(0, done).sort();
    return {
      concurrency,
      inserts: done,
      seconds: Math.round(seconds * 100) / 100,
      insertsPerSecond: Math.round(done / seconds),
      latencyMs: { p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: percentile(sorted, 100) },
      errors,
      server,
    };
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await pool.end();
  }
}
