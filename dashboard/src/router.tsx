import { type AnchorHTMLAttributes, createContext, type MouseEvent, type ReactNode, useCallback, useContext, useEffect, useMemo, useState } from 'react';

/** Where the dashboard lives; every route is a path under it (see vite.config.ts `base`). */
export const basePath = '/app';

export interface Location {
  /** The path under /app, starting with `/` (`/keys`, `/sign-in`). */
  path: string;
  /** The query string's parameters. */
  query: URLSearchParams;
}

interface Router {
  location: Location;
  /** Goes to `to` (a path under /app, may carry a query): a new history entry, or `replace` the current one. */
  navigate(to: string, options?: { replace?: boolean }): void;
}

const RouterContext = createContext<Router | undefined>(undefined);

function currentLocation(): Location {
  const { pathname, search } = window.location;
  const path = pathname.startsWith(`${basePath}/`) ? pathname.slice(basePath.length) : '/';
  return { path: path.length > 1 ? path.replace(/\/+$/, '') : path, query: new URLSearchParams(search) };
}

/** The History API router: paths under /app/, back and forward buttons included; no page reloads. */
export function RouterProvider({ children }: { children: ReactNode }) {
  const [location, setLocation] = useState(currentLocation);
  useEffect(() => {
    const onPopState = () => setLocation(currentLocation());
    window.addEventListener('popstate', onPopState);
    return () => window.removeEventListener('popstate', onPopState);
  }, []);
  const navigate = useCallback((to: string, options: { replace?: boolean } = {}) => {
    const url = `${basePath}${to.startsWith('/') ? to : `/${to}`}`;
    if (options.replace) window.history.replaceState(null, '', url);
    else window.history.pushState(null, '', url);
    setLocation(currentLocation());
  }, []);
  const router = useMemo(() => ({ location, navigate }), [location, navigate]);
  return <RouterContext.Provider value={router}>{children}</RouterContext.Provider>;
}

export function useRouter(): Router {
  const router = useContext(RouterContext);
  if (!router) throw new Error('useRouter needs a RouterProvider above it');
  return router;
}

/**
 * Matches `path` against `pattern` (`/keys/:keyId`): the named segments' decoded values, or
 * undefined when it does not match.
 */
export function matchPath(pattern: string, path: string): Record<string, string> | undefined {
  const patternSegments = pattern.split('/').filter(Boolean);
  const pathSegments = path.split('/').filter(Boolean);
  if (patternSegments.length !== pathSegments.length) return undefined;
  const params: Record<string, string> = {};
  for (const [index, segment] of patternSegments.entries()) {
    const value = pathSegments[index];
    if (segment.startsWith(':')) {
      try {
        params[segment.slice(1)] = decodeURIComponent(value);
      } catch {
        return undefined;
      }
    } else if (segment !== value) return undefined;
  }
  return params;
}

interface LinkProps extends Omit<AnchorHTMLAttributes<HTMLAnchorElement>, 'href'> {
  /** A path under /app (`/keys`, `/sign-in?next=/keys`). */
  to: string;
}

/** A real link (`<a href>`: opens in a new tab, keyboard and screen readers work) that navigates without a reload. */
export function Link({ to, onClick, children, ...rest }: LinkProps) {
  const { navigate } = useRouter();
  const handleClick = (event: MouseEvent<HTMLAnchorElement>) => {
    onClick?.(event);
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(to);
  };
  return (
    <a href={`${basePath}${to}`} onClick={handleClick} {...rest}>
      {children}
    </a>
  );
}
