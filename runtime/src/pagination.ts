import { invalidArgument } from './errors.js';

/**
 * Lists of docs/conventions.md#pagination: `?limit=` (default 20, 1..100, else 400) and `?after=<cursor>`, newest first,
 * answered as `{data, has_more, next_cursor}`. A cursor is the (time, id) of the last row of a
 * page, opaque to clients: base64url of `<microseconds since the epoch>.<id>`, exact to
 * Postgres' microsecond precision.
 */

export const defaultLimit = 20;
export const maxLimit = 100;
/** 9999-12-31T23:59:59.999999Z in microseconds since the epoch. */
const maxCursorMicros = 253_402_300_799_999_999n;

export interface Cursor {
  /** Microseconds since the Unix epoch (a decimal string: exact beyond 2^53). */
  micros: string;
  id: string;
}

export function parseLimit(limit: number | undefined, field = 'limit'): number {
  if (limit === undefined) return defaultLimit;
  if (!Number.isInteger(limit) || limit < 1 || limit > maxLimit) {
    throw invalidArgument(field, `limit must be an integer from 1 to ${maxLimit}.`);
  }
  return limit;
}

export function encodeCursor(cursor: Cursor): string {
  return Buffer.from(`${cursor.micros}.${cursor.id}`, 'utf8').toString('base64url');
}

/** The cursor of `?after=`; undefined when empty; 400 on field `after` when it is not one of ours. */
export function decodeCursor(raw: string | undefined, field = 'after'): Cursor | undefined {
  if (!raw) return undefined;
  const text = /^[A-Za-z0-9_-]{1,200}$/.test(raw) ? Buffer.from(raw, 'base64url').toString('utf8') : '';
  const match = /^(\d{1,20})\.([A-Za-z0-9_]{1,100})$/.exec(text);
  // Beyond year 9999 is no timestamp of ours (and would overflow Postgres' bigint arithmetic).
  if (!match || BigInt(match[1]) > maxCursorMicros) throw invalidArgument(field, 'after must be the next_cursor of a previous page.');
  return { micros: match[1], id: match[2] };
}

/** Splits the `limit + 1` rows fetched into a page and the next cursor. */
export function pageOf<Row>(rows: Row[], limit: number, cursorOf: (row: Row) => Cursor): { rows: Row[]; hasMore: boolean; nextCursor?: string } {
  const hasMore = rows.length > limit;
  const page = hasMore ? rows.slice(0, limit) : rows;
  return { rows: page, hasMore, nextCursor: hasMore ? encodeCursor(cursorOf(page[page.length - 1])) : undefined };
}

/** A report window of docs/conventions.md#pagination: `?days=` 1..365, default 30; else 400 on `field`. */
export function parseDays(days: number | undefined, field = 'days'): number {
  if (days === undefined) return 30;
  if (!Number.isInteger(days) || days < 1 || days > 365) throw invalidArgument(field, `${field} must be a whole number from 1 to 365.`);
  return days;
}
