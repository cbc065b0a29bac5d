import { useEffect, useState } from 'react';

/** The token a mailed link carries in its fragment (`#token=…`), if the address has one. */
function tokenOfFragment(): string | undefined {
  return new URLSearchParams(window.location.hash.slice(1)).get('token') ?? undefined;
}

/** sessionStorage, which a browser may refuse (a private window, a policy): then nothing is kept. */
function tabStorage(): Storage | undefined {
  try {
    return window.sessionStorage;
  } catch {
    return undefined;
  }
}

/**
 * The token of the mailed link that opened the page (docs/api/identity.md#mail): read from the
 * fragment, which never reaches a server, and then taken off the address, so it stays neither in
 * the history nor on screen. The page only fills its form with it; the visitor's click redeems it
 * (a mail scanner opening the link redeems nothing). With `keepAs`, the token also waits in this
 * tab's storage under that name, for a page that needs a sign-in first (forgetMailedToken drops it).
 */
export function useMailedToken(keepAs?: string): string {
  const [token] = useState(() => tokenOfFragment() ?? (keepAs ? tabStorage()?.getItem(keepAs) : undefined) ?? '');
  useEffect(() => {
    if (!tokenOfFragment()) return;
    if (keepAs && token) tabStorage()?.setItem(keepAs, token);
    window.history.replaceState(window.history.state, '', `${window.location.pathname}${window.location.search}`);
  }, [keepAs, token]);
  return token;
}

/** Drops a token kept by useMailedToken (it was used). */
export function forgetMailedToken(keepAs: string): void {
  tabStorage()?.removeItem(keepAs);
}
