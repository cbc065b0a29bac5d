import type { Knex } from '@switchboard/runtime/db';

// Shared SQL pieces of the identity store: the connection type every function takes and the keyset
// pagination of its lists. Tables are unqualified (search_path = identity).

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
