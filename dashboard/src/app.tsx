import type { ReactNode } from 'react';
import { Loading } from './components/loading';
import { NavBar } from './components/nav-bar';
import { Page } from './components/page';
import { Redirect } from './components/redirect';
import { WorkspaceSwitcher } from './components/workspace-switcher';
import { can } from './permissions';
import { Link, matchPath, useRouter } from './router';
import { homePath, type Route, routes } from './routes';
import { useSession } from './session';

function findRoute(path: string): { route: Route; params: Record<string, string> } | undefined {
  for (const route of routes) {
    const params = matchPath(route.path, path);
    if (params) return { route, params };
  }
  return undefined;
}

/** The page to go to after signing in: the `next` query parameter when it is a dashboard path. */
function nextPath(query: URLSearchParams): string {
  const next = query.get('next');
  return next?.startsWith('/') && !next.startsWith('//') ? next : homePath;
}

function SignedInLayout({ children }: { children: ReactNode }) {
  const { account, workspace, signOut } = useSession();
  return (
    <>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="top-bar">
        <Link to={homePath} className="brand">
          Switchboard
        </Link>
        <WorkspaceSwitcher />
        <div className="user">
          <span className="user-email">{account?.email}</span>
          <button type="button" className="button" onClick={() => void signOut()}>
            Sign out
          </button>
        </div>
      </header>
      <div className="frame">
        <NavBar />
        {/* A new workspace remounts the page: nothing of the previous one stays on screen. */}
        <main id="main" className="content" key={workspace?.org_id}>
          {children}
        </main>
      </div>
    </>
  );
}

function SignedOutLayout({ children }: { children: ReactNode }) {
  return (
    <>
      <header className="top-bar">
        <Link to="/sign-in" className="brand">
          Switchboard
        </Link>
      </header>
      <main id="main" className="content narrow">
        {children}
      </main>
    </>
  );
}

/** The dashboard: the page of the current path, in the layout of the visitor's state, or a redirect. */
export function App() {
  const { location } = useRouter();
  const { status, role, workspace } = useSession();
  const signedIn = status === 'signed-in';
  const Layout = signedIn ? SignedInLayout : SignedOutLayout;
  const found = findRoute(location.path);
  // The session of the cookie is being renewed: where to go depends on it (pages for anyone need not wait).
  if (status === 'restoring' && found?.route.audience !== 'anyone') {
    return (
      <Layout>
        <Loading what="Signing in" />
      </Layout>
    );
  }
  if (location.path === '/') return <Redirect to={signedIn ? homePath : '/sign-in'} />;

  if (!found) {
    return (
      <Layout>
        <Page title="Page not found">
          <p>
            There is no page at this address. <Link to={signedIn ? homePath : '/sign-in'}>Go to the start page</Link>.
          </p>
        </Page>
      </Layout>
    );
  }
  const { route, params } = found;
  const audience = route.audience ?? 'signed-in';
  if (audience === 'signed-in' && !signedIn) {
    if (status === 'starting') {
      return (
        <Layout>
          <Loading what="Signing in" />
        </Layout>
      );
    }
    const here = `${location.path}${location.query.size ? `?${location.query}` : ''}`;
    return <Redirect to={`/sign-in?next=${encodeURIComponent(here)}`} />;
  }
  if (audience === 'signed-out' && signedIn) return <Redirect to={nextPath(location.query)} />;
  if (route.action && !can(role, route.action)) {
    return (
      <Layout>
        <Page title="Not available">
          <p>
            Your role in {workspace?.name} ({role}) does not allow this page. The owner or an admin of the workspace can change roles.
          </p>
        </Page>
      </Layout>
    );
  }
  return (
    <Layout>
      <route.page params={params} />
    </Layout>
  );
}
