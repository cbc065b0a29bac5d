/** One page of a list: every list of the API answers `{data, has_more, next_cursor}`. */
export interface Page<T> {
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

/** Fetches the page after `after` (undefined: the first page), e.g. with `params: {query: {after}}`. */
export type FetchPage<T> = (after: string | undefined) => Promise<Page<T>>;

/** The items of a list across its pages, fetched lazily as they are iterated. */
export interface Paginated<T> extends AsyncIterable<T> {
  /** The pages themselves, one request each. */
  pages(): AsyncIterableIterator<Page<T>>;
  /** Every item of every page, in order (fetches until `has_more` is false). */
  collect(): Promise<T[]>;
  /** The first page alone (one request). */
  firstPage(): Promise<Page<T>>;
}

/**
 * Iterates a list across its pages: calls `fetchPage(undefined)`, then `fetchPage(next_cursor)`
 * while `has_more` is true. Nothing is fetched until the iteration starts, and each iteration
 * starts again from the first page.
 *
 * ```ts
 * for await (const key of paginate((after) => client.get('/v1/keys', { params: { query: { limit: 50, after } } }))) {
 *   console.log(key.key_id);
 * }
 * ```
 */
export function paginate<T>(fetchPage: FetchPage<T>): Paginated<T> {
  async function* pages(): AsyncIterableIterator<Page<T>> {
    let after: string | undefined;
    const seen = new Set<string>();
    for (;;) {
      const page = await fetchPage(after);
      yield page;
      if (!page.has_more) return;
      const next = page.next_cursor;
      // A list that says "more" without a new cursor would loop for ever.
      if (!next) throw new Error('paginate: the page has has_more true but no next_cursor');
      if (seen.has(next)) throw new Error(`paginate: the cursor ${next} came back twice`);
      seen.add(next);
      after = next;
    }
  }
  async function* items(): AsyncIterableIterator<T> {
    for await (const page of pages()) yield* page.data;
  }
  return {
    pages,
    [Symbol.asyncIterator]: items,
    firstPage: () => fetchPage(undefined),
    async collect() {
      const all: T[] = [];
      for await (const item of items()) all.push(item);
      return all;
    },
  };
}
