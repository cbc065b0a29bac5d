import type { ReactNode } from 'react';
import type { LoadState } from '../use-load';
import { ErrorMessage } from './error-message';
import { Loading } from './loading';

/** Renders a `useLoad` state: the loading line, the error, or `children(data)`. */
export function Loaded<T>({ state, what, children }: { state: LoadState<T>; what?: string; children: (data: T) => ReactNode }) {
  if (state.status === 'loading') return <Loading what={what} />;
  if (state.status === 'error') return <ErrorMessage error={state.error} />;
  return children(state.data);
}
