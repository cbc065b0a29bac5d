import { createDb, isDatabaseUnavailable, type Knex } from '@switchboard/runtime/db';
import { requireEnv } from '@switchboard/runtime/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * A connection that breaks in the middle of a transaction (Postgres restarted, its backend
 * terminated) is an outage (503, retry), not a bug (500): the chaos run's restart of Postgres
 * found billing answering Internal for "ROLLBACK - Client has encountered a connection error
 * and is not queryable".
 */

let db: Knex;
let admin: Knex;

beforeAll(() => {
  db = createDb(requireEnv('DATABASE_URL'), 'public', 2);
  admin = createDb(requireEnv('DATABASE_URL'), 'public', 1);
});

afterAll(async () => {
  await db?.destroy();
  await admin?.destroy();
});

describe('a transaction whose connection breaks', () => {
  it('fails with an error isDatabaseUnavailable recognises', async () => {
    const failure = await db
      .transaction(async (trx) => {
        const { rows } = await trx.raw<{ rows: Array<{ pid: number }> }>('SELECT pg_backend_pid() AS pid');
        await admin.raw('SELECT pg_terminate_backend(?)', [rows[0].pid]);
        await trx.raw('SELECT 1');
      })
      .then(
        () => undefined,
        (err: unknown) => err as Error,
      );
    expect(failure).toBeInstanceOf(Error);
    expect(isDatabaseUnavailable(failure), failure?.message).toBe(true);
    // And the pool recovers: the next transaction works.
    expect((await db.raw<{ rows: Array<{ one: number }> }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });

  it('a query after the client saw its connection break (the ROLLBACK of such a transaction) is an outage too', async () => {
    const client = new pg.Client({ connectionString: requireEnv('DATABASE_URL') });
    await client.connect();
    const broke = new Promise<void>((resolve) => client.once('error', () => resolve()));
    await client.query('BEGIN');
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await admin.raw('SELECT pg_terminate_backend(?)', [rows[0].pid]);
    await broke;
    const failure = await client.query('ROLLBACK').then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(failure?.message).toMatch(/not queryable/);
    expect(isDatabaseUnavailable(failure), failure?.message).toBe(true);
    await client.end().catch(() => undefined);
  });
});
