import type { ReactNode } from 'react';

/** A confirmation of what just happened (saved, sent), announced to screen readers. */
export function Notice({ children }: { children: ReactNode }) {
  return (
    <div className="notice" role="status">
      {children}
    </div>
  );
}
