import type { Page } from '@switchboard/sdk';
import { type DependencyList, useCallback, useEffect, useRef, useState } from 'react';
import type { LoadState } from './use-load';

export type PagesState<T> = LoadState<T[]> & {
  /** Whether the API has more items after those loaded. */
  hasMore: boolean;
  /** Whether the next page is being fetched. */
  loadingMore: boolean;
  /** Why the last `loadMore` failed (the items loaded stay). */
  moreError?: unknown;
  /** Fetches the next page and appends it. */
  loadMore(): void;
  /** Fetches the first page again (after a change the page made); the items stay on screen meanwhile. */
  reload(): void;
};

/**
 * A list of the API (`{data, has_more, next_cursor}`) shown a page at a time: the first page when
 * the component mounts or `deps` change, the next one on `loadMore()`. An answer that arrives
 * after a newer load started is dropped.
 */
export function usePages<T>(fetchPage: (after: string | undefined) => Promise<Page<T>>, deps: DependencyList): PagesState<T> {
  const [state, setState] = useState<LoadState<T[]>>({ status: 'loading' });
  const [cursor, setCursor] = useState<string | null>(null);
  const [loadingMore, setLoadingMore] = useState(false);
  const [moreError, setMoreError] = useState<unknown>();
  const [generation, setGeneration] = useState(0);
  // Each load takes a number; only the latest one may write its answer.
  const latest = useRef(0);
  const fetchRef = useRef(fetchPage);
  fetchRef.current = fetchPage;

  // The caller's deps decide when the list starts again.
  useEffect(() => {
    const ticket = ++latest.current;
    setState((previous) => (previous.status === 'done' && generation > 0 ? previous : { status: 'loading' }));
    setLoadingMore(false);
    setMoreError(undefined);
    fetchRef.current(undefined).then(
      (page) => {
        if (ticket !== latest.current) return;
        setState({ status: 'done', data: page.data });
        setCursor(page.has_more ? page.next_cursor : null);
      },
      (error: unknown) => ticket === latest.current && setState({ status: 'error', error }),
    );
  }, [...deps, generation]);

  const loadMore = useCallback(() => {
    if (!cursor || loadingMore) return;
    const ticket = ++latest.current;
    setLoadingMore(true);
    setMoreError(undefined);
    fetchRef.current(cursor).then(
      (page) => {
        if (ticket !== latest.current) return;
        setState((previous) => ({ status: 'done', data: [...(previous.status === 'done' ? previous.data : []), ...page.data] }));
        setCursor(page.has_more ? page.next_cursor : null);
        setLoadingMore(false);
      },
      (error: unknown) => {
        if (ticket !== latest.current) return;
        setMoreError(error);
        setLoadingMore(false);
      },
    );
  }, [cursor, loadingMore]);

  const reload = useCallback(() => setGeneration((n) => n + 1), []);
  return { ...state, hasMore: cursor !== null, loadingMore, moreError, loadMore, reload };
}
