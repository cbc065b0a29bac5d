import { Code, type ConnectError } from '@connectrpc/connect';
import { describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor, pageOf, parseLimit } from '../src/pagination.js';

const refusal = (run: () => unknown) => {
  try {
    run();
  } catch (err) {
    return err as ConnectError;
  }
  throw new Error('expected a refusal');
};
const encoded = (text: string) => Buffer.from(text, 'utf8').toString('base64url');

describe('pagination', () => {
  it('takes limits of 1..100 (20 by default) and refuses others on the field', () => {
    expect(parseLimit(undefined)).toBe(20);
    expect(parseLimit(1)).toBe(1);
    expect(parseLimit(100)).toBe(100);
    for (const limit of [0, 101, -1, 1.5]) {
      const err = refusal(() => parseLimit(limit));
      expect(err.code).toBe(Code.InvalidArgument);
      expect(err.rawMessage).toMatch(/1 to 100/);
    }
  });

  it('round-trips its own cursors', () => {
    const cursor = { micros: '1795301871794123', id: 'org_abc' };
    expect(decodeCursor(encodeCursor(cursor))).toEqual(cursor);
    expect(decodeCursor(undefined)).toBeUndefined();
    expect(decodeCursor('')).toBeUndefined();
  });

  it('refuses cursors that are not its own, or point past any timestamp (400 on after)', () => {
    for (const raw of ['not base64!', encoded('abc'), encoded('12.id with space'), encoded('99999999999999999999.abc'), encoded('253402300800000000.abc')]) {
      const err = refusal(() => decodeCursor(raw));
      expect(err.code).toBe(Code.InvalidArgument);
    }
    expect(decodeCursor(encoded('253402300799999999.abc'))).toEqual({ micros: '253402300799999999', id: 'abc' });
  });

  it('cuts the limit + 1 rows into a page and the cursor of its last row', () => {
    const rows = [1, 2, 3].map((n) => ({ micros: String(n), id: `r${n}` }));
    const page = pageOf(rows, 2, (row) => row);
    expect(page.rows).toEqual(rows.slice(0, 2));
    expect(page.hasMore).toBe(true);
    expect(decodeCursor(page.nextCursor)).toEqual(rows[1]);
    expect(pageOf(rows, 3, (row) => row)).toEqual({ rows, hasMore: false, nextCursor: undefined });
  });
});
