import { type ReactNode, useId } from 'react';

/** A titled part of a page: a region named by its heading. */
export function Section({ title, children, danger }: { title: string; children: ReactNode; danger?: boolean }) {
  const id = useId();
  return (
    <section className={danger ? 'section danger-zone' : 'section'} aria-labelledby={id}>
      <h2 id={id}>{title}</h2>
      {children}
    </section>
  );
}
