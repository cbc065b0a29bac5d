import type { PagesState } from '../use-pages';
import { ErrorMessage } from './error-message';

/** The button under a paged list (`usePages`) that fetches the next page, while there is one. */
export function LoadMore<T>({ pages, what }: { pages: PagesState<T>; what: string }) {
  if (!pages.hasMore && !pages.moreError) return null;
  return (
    <div className="load-more">
      {pages.moreError !== undefined && <ErrorMessage error={pages.moreError} />}
      {pages.hasMore && (
        <button type="button" className="button" onClick={pages.loadMore} disabled={pages.loadingMore} aria-busy={pages.loadingMore}>
          {pages.loadingMore ? `Loading more ${what}…` : `Load more ${what}`}
        </button>
      )}
    </div>
  );
}
