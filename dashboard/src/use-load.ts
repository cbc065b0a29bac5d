import { type DependencyList, useCallback, useEffect, useRef, useState } from 'react';

export type LoadState<T> = { status: 'loading' } | { status: 'error'; error: unknown } | { status: 'done'; data: T };

/**
 * Runs `load` when the component mounts and whenever `deps` change, and gives its state:
 * loading, the error, or the data. `reload()` runs it again (after a change the page made), keeping
 * the current data shown meanwhile. An answer that arrives after a newer load started is dropped.
 */
export function useLoad<T>(load: () => Promise<T>, deps: DependencyList): LoadState<T> & { reload(): void } {
  const [state, setState] = useState<LoadState<T>>({ status: 'loading' });
  const [generation, setGeneration] = useState(0);
  // A reload keeps the data on screen until the new answer replaces it; new deps show the loading state.
  const reloading = useRef(false);
  // biome-ignore lint/correctness/useExhaustiveDependencies: the caller's deps decide when `load` changes.
  useEffect(() => {
    let current = true;
    if (!reloading.current) setState({ status: 'loading' });
    reloading.current = false;
    load().then(
      (data) => current && setState({ status: 'done', data }),
      (error: unknown) => current && setState({ status: 'error', error }),
    );
    return () => {
      current = false;
    };
  }, [...deps, generation]);
  const reload = useCallback(() => {
    reloading.current = true;
    setGeneration((n) => n + 1);
  }, []);
  return { ...state, reload };
}
