import { type ReactNode, useEffect, useRef } from 'react';

/**
 * A page: its heading, which gets the focus when the page opens (screen readers announce the new
 * page, and Tab goes on from there), and the document's title.
 */
export function Page({ title, children }: { title: string; children: ReactNode }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${title} · Switchboard`;
    heading.current?.focus();
  }, [title]);
  return (
    <>
      <h1 ref={heading} tabIndex={-1}>
        {title}
      </h1>
      {children}
    </>
  );
}
