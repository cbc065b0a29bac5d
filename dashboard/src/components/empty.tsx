import type { ReactNode } from 'react';

/** A list with nothing in it yet: what is missing, and (children) how to add the first one. */
export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <p className="empty-title">{title}</p>
      {children}
    </div>
  );
}
