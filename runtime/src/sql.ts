import type { Knex } from './db.js';

// SQL pieces every service store shares: the connection type each store function takes, the
// unique-violation test, and the keyset pagination of lists (docs/conventions.md#pagination). Tables are unqualified:
// the search_path is the service's schema.

export type Db = Knex | Knex.Transaction;

export function isUniqueViolation(err: unknown, constraint: string): boolean {
  const error = err as { code?: string; constraint?: string };
  return error?.code === '23505' && error.constraint === constraint;
}

export interface PageQuery {
  limit: number;
  after?: { micros: string; id: string };
}

export const microsOf = (column: string) => `(extract(epoch from ${column}) * 1000000)::bigint::text`;

/**
 * The keyset condition of a page after `page.after` (newest first by time, then id) and the
 * bindings of the query it goes in: `leading` before it, the LIMIT of `limit + 1` rows after.
 */
export function pageClause(page: PageQuery, timeColumn: string, idColumn: string, leading: Knex.RawBinding[]): { cursor: string; bindings: Knex.RawBinding[] } {
  const bindings = [...leading];
  let cursor = '';
  if (page.after) {
    cursor = `AND (${timeColumn}, ${idColumn}) < (timestamptz 'epoch' + ?::bigint * interval '1 microsecond', ?)`;
    bindings.push(page.after.micros, page.after.id);
  }
  bindings.push(page.limit + 1);
  return { cursor, bindings };
}

/**
 * `rows` sorted by `key` (code-unit order): what a batch writes or locks goes in one order in
 * every process, so two concurrent batches over the same keys wait for each other instead of
 * deadlocking. A composite key joins its parts with a character none of them holds.
 */
export function inKeyOrder<T>(rows: readonly T[], key: (row: T) => string): T[] {
  const keyed = rows.map((row) => ({ row, key: key(row) }));
  keyed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return keyed.map(({ row }) => row);
}
