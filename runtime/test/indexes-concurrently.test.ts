import { randomBytes } from 'node:crypto';
import { createDb, createIndexesConcurrently, type Knex } from '@switchboard/runtime/db';
import { requireEnv } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * createIndexesConcurrently, what a migration with `config = { transaction: false }` builds its
 * indexes with (services/webhooks/migrations/006_retention.ts runs it through migrate()): an
 * index built once stays, and one an interrupted build left invalid is built again.
 */

const schema = `indexes_${randomBytes(3).toString('hex')}`;
let db: Knex;

const indexes = async () =>
  (
    await db.raw<{ rows: Array<{ name: string; valid: boolean; definition: string }> }>(
      `SELECT c.relname AS name, i.indisvalid AS valid, pg_get_indexdef(i.indexrelid) AS definition FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
       WHERE c.relnamespace = ?::regnamespace AND c.relname LIKE 'things%idx' ORDER BY 1`,
      [schema],
    )
  ).rows;

beforeAll(async () => {
  db = createDb(requireEnv('DATABASE_URL'), schema, 2);
  await db.raw('CREATE SCHEMA ??', [schema]);
  await db.raw('CREATE TABLE things (id int PRIMARY KEY, v int NOT NULL)');
  await db.raw('INSERT INTO things SELECT g, g % 10 FROM generate_series(1, 100) g');
});

afterAll(async () => {
  await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  await db.destroy();
});

describe('createIndexesConcurrently', () => {
  it('builds indexes outside a transaction, keeps a valid one, and builds an invalid one again', async () => {
    // A concurrent build that fails (duplicates under UNIQUE) leaves its index behind, invalid.
    await expect(db.raw('CREATE UNIQUE INDEX CONCURRENTLY things_v_idx ON things (v)')).rejects.toThrow(/duplicate|unique/i);
    expect(await indexes()).toEqual([{ name: 'things_v_idx', valid: false, definition: expect.stringContaining('UNIQUE') }]);

    await createIndexesConcurrently(db, [
      { name: 'things_v_idx', on: 'things (v)' },
      { name: 'things_id_v_idx', on: 'things (id, v)' },
    ]);
    const built = await indexes();
    expect(built.map(({ name, valid }) => ({ name, valid }))).toEqual([
      { name: 'things_id_v_idx', valid: true },
      { name: 'things_v_idx', valid: true },
    ]);
    expect(built[1].definition).not.toContain('UNIQUE');

    // Again (a second start): nothing to do, the valid indexes stay as they are.
    const oids = await db.raw<{ rows: Array<{ oid: number }> }>(`SELECT 'things_v_idx'::regclass::oid::int AS oid`);
    await createIndexesConcurrently(db, [{ name: 'things_v_idx', on: 'things (v)' }]);
    expect((await db.raw<{ rows: Array<{ oid: number }> }>(`SELECT 'things_v_idx'::regclass::oid::int AS oid`)).rows).toEqual(oids.rows);
    // The connection it used got its statement timeout back.
    const timeouts = await Promise.all(
      [1, 2].map(async () => (await db.raw<{ rows: Array<{ statement_timeout: string }> }>('SHOW statement_timeout')).rows[0]),
    );
    for (const row of timeouts) expect(row.statement_timeout).toBe('10s');
  });
});
