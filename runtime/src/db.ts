import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import type { Metrics } from './metrics.js';

export type { Knex };

// numeric stays a string (money is decimal.js, never a float); bigint counts fit in a JS number.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

/** A knex pool whose search_path is the service's own schema. */
/** No single statement of a request runs longer (a stuck query must not hold a request). */
const statementTimeoutMs = 10_000;

export function createDb(databaseUrl: string, schema: string, poolMax = 10): Knex {
  return knexFactory({
    client: 'pg',
    connection: { connectionString: databaseUrl, connectionTimeoutMillis: 3000, statement_timeout: statementTimeoutMs } as Knex.PgConnectionConfig,
    searchPath: [schema],
    pool: { min: 0, max: poolMax },
    // A database outage must surface as 503 within seconds, not hang the request.
    acquireConnectionTimeout: 4000,
  });
}

/**
 * A second, small pool on the same database and search_path as `db` whose connections act as
 * `role` (`SET ROLE` when a connection opens): what a service gives the code that must hold only
 * that role's rights (identity's audit log: SELECT and INSERT, never UPDATE or DELETE). SET ROLE
 * drops superuser rights too, so a superuser development setup is held to the same.
 */
export function createRolePool(db: Knex, role: string, poolMax = 4): Knex {
  const config = db.client.config as Knex.Config;
  return knexFactory({
    ...config,
    pool: {
      min: 0,
      max: poolMax,
      afterCreate(connection: pg.Client, done: (err: Error | null, connection: pg.Client) => void) {
        connection.query(`SET ROLE ${pg.escapeIdentifier(role)}`).then(
          () => done(null, connection),
          (err: Error) => done(err, connection),
        );
      },
    },
  });
}

/** The pool's connections in use, idle, and the acquisitions waiting for one, when scraped. */
export function watchDatabasePool(metrics: Metrics, db: Knex): void {
  const pool = (db.client as { pool?: { numUsed(): number; numFree(): number; numPendingAcquires(): number } }).pool;
  metrics.gauge('db_pool_connections', 'Database pool connections by state (used, idle, pending acquisitions).', ['state'], (gauge) => {
    gauge.set({ state: 'used' }, pool?.numUsed() ?? 0);
    gauge.set({ state: 'idle' }, pool?.numFree() ?? 0);
    gauge.set({ state: 'pending' }, pool?.numPendingAcquires() ?? 0);
  });
}

interface MigrationModule {
  up(knex: Knex): Promise<void>;
  down?(knex: Knex): Promise<void>;
  /** `{ transaction: false }` for a migration that cannot run in a transaction (createIndexesConcurrently). */
  config?: { transaction?: boolean };
}

/** Loads compiled migrations (`NNN_name.js`) from a directory, in name order. */
class DirectoryMigrationSource implements Knex.MigrationSource<string> {
  constructor(private readonly directory: string) {}

  async getMigrations(): Promise<string[]> {
    const files = await readdir(this.directory);
    return files.filter((file) => file.endsWith('.js')).sort();
  }

  getMigrationName(file: string): string {
    return file.replace(/\.js$/, '');
  }

  async getMigration(file: string): Promise<Knex.Migration> {
    const module = (await import(pathToFileURL(path.join(this.directory, file)).href)) as MigrationModule;
    // knex reads `config.transaction` of what this returns (its Migration type does not name it).
    return { up: module.up, down: module.down ?? (async () => undefined), config: module.config } as Knex.Migration;
  }
}

/**
 * Builds indexes without blocking writes to their tables (CREATE INDEX CONCURRENTLY), for a
 * migration that exports `config = { transaction: false }` (such a build cannot run in a
 * transaction). One connection without a statement timeout: a table that grew for months takes
 * longer than a request. An index an interrupted build left invalid is dropped and built again;
 * a valid one is kept.
 */
export async function createIndexesConcurrently(knex: Knex, indexes: Array<{ name: string; on: string }>): Promise<void> {
  const connection = await knex.client.acquireConnection();
  try {
    await knex.raw('SET statement_timeout = 0').connection(connection);
    for (const index of indexes) {
      const { rows } = await knex
        .raw<{ rows: Array<{ valid: boolean }> }>(
          `SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
           WHERE c.relname = ? AND c.relnamespace = current_schema()::regnamespace`,
          [index.name],
        )
        .connection(connection);
      if (rows[0]?.valid) continue;
      if (rows[0]) await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS ??', [index.name]).connection(connection);
      await knex.raw(`CREATE INDEX CONCURRENTLY ?? ON ${index.on}`, [index.name]).connection(connection);
    }
  } finally {
    await knex.raw(`SET statement_timeout = ${statementTimeoutMs}`).connection(connection);
    await knex.client.releaseConnection(connection);
  }
}

/**
 * Creates the service's schema and brings it to the latest migration. Each service has its own
 * migrations table inside its own schema and never touches another schema. Returns the names of
 * the migrations this call applied (none when the schema was up to date).
 */
/** How often a replica asks again for the migration lock another replica holds. */
const migrationLockPollMs = 100;

export async function migrate(db: Knex, schema: string, migrationsDirectory: string): Promise<string[]> {
  const lockKey = `switchboard.migrate.${schema}`;
  // Replicas starting together: a session advisory lock, held on a connection of its own,
  // lets one migrate at a time (knex's lock table cannot protect the creation of itself).
  const lockConnection = await db.client.acquireConnection();
  try {
    // Waiting for another replica's migration may take longer than a request's statement timeout.
    await db.raw('SET statement_timeout = 0').connection(lockConnection);
    // Tried, not waited for in one statement: a statement waiting on the lock holds a snapshot,
    // and another replica's CREATE INDEX CONCURRENTLY (createIndexesConcurrently), which waits
    // for every older snapshot of the database, would then wait for us while we wait for it.
    while (
      !(await db.raw<{ rows: Array<{ locked: boolean }> }>('SELECT pg_try_advisory_lock(hashtext(?)) AS locked', [lockKey]).connection(lockConnection)).rows[0]
        ?.locked
    ) {
      await delay(migrationLockPollMs);
    }
    try {
      // CREATE SCHEMA needs the database-wide CREATE right even when the schema exists; a
      // production role that owns only its schema must not need it.
      const existing = await db('pg_catalog.pg_namespace').where({ nspname: schema }).first();
      if (!existing) await db.raw('CREATE SCHEMA IF NOT EXISTS ??', [schema]);
      const [, applied]: [number, string[]] = await db.migrate.latest({
        schemaName: schema,
        tableName: 'knex_migrations',
        migrationSource: new DirectoryMigrationSource(migrationsDirectory),
      });
      return applied;
    } finally {
      await db.raw('SELECT pg_advisory_unlock(hashtext(?))', [lockKey]).connection(lockConnection);
      await db.raw(`SET statement_timeout = ${statementTimeoutMs}`).connection(lockConnection);
    }
  } finally {
    await db.client.releaseConnection(lockConnection);
  }
}

/**
 * Runs `fn` once `trx` has committed, never after a rollback: for signals about what the
 * transaction wrote that must not hold its locks (a wake-up, a NOTIFY). Top-level transactions
 * only (a savepoint's promise settles when the savepoint is released).
 */
export function afterCommit(trx: Knex.Transaction, fn: () => void): void {
  trx.executionPromise.then(
    () => fn(),
    () => undefined,
  );
}

/** True for errors that mean the database is unreachable (→ 503), not a bug. */
export function isDatabaseUnavailable(err: unknown): boolean {
  const error = err as { code?: string; name?: string; message?: string };
  return (
    error?.name === 'KnexTimeoutError' ||
    // Refused, reset or unresolvable connections; shutdown, too many clients, statement or lock
    // timeout, deadlock (all: try again shortly).
    [
      'ECONNREFUSED',
      'ECONNRESET',
      'ETIMEDOUT',
      'EPIPE',
      'ENOTFOUND',
      'EAI_AGAIN',
      '57P01',
      '57P03',
      '53300',
      '08006',
      '08001',
      '57014',
      '55P03',
      '40P01',
    ].includes(error?.code ?? '') ||
    // pg's words for a connection that broke mid-transaction: its ROLLBACK fails with them.
    /Connection terminated|timeout exceeded when trying to connect|encountered a connection error and is not queryable/i.test(error?.message ?? '')
  );
}

/**
 * True for errors Postgres raises because of the size or bytes of a value it was given (a NUL
 * or an unstorable character, a string or index entry too long): the client's input (→ 400).
 * Type errors are not among them: those are bugs and stay 500s.
 */
export function isDatabaseInputError(err: unknown): boolean {
  return ['22021', '22P05', '54000', '22001'].includes((err as { code?: string })?.code ?? '');
}
