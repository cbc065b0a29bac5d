import { createSwitchboardClient, paginate, type Schemas, type SwitchboardClient } from '@switchboard/sdk';
import { createContext, type ReactNode, useCallback, useContext, useEffect, useMemo, useRef, useState } from 'react';

export type Account = Schemas['switchboard.identity.v1.Account'];
/** A workspace is an organization; the caller's `role` in it comes along. */
export type Workspace = Schemas['switchboard.identity.v1.Organization'];

export interface Session {
  /**
   * The SDK client every page calls the API with. It holds the access token in memory only; the
   * refresh token is an HttpOnly cookie the page never reads (the SDK's cookie mode,
   * docs/api/identity.md#the-dashboards-session-cookie), so a reload or a return from the payment
   * page renews the session. It renews on `token_expired` and sends `X-Workspace-Id` of the
   * current workspace.
   */
  client: SwitchboardClient;
  /**
   * `restoring`: the page just loaded and renews the session of the cookie; `starting`: signed
   * in, the account and workspaces are loading.
   */
  status: 'signed-out' | 'restoring' | 'starting' | 'signed-in';
  account?: Account;
  /** The user's workspaces, the personal one first. */
  workspaces: Workspace[];
  /** The workspace the pages act in (the personal one until another is picked). */
  workspace?: Workspace;
  /** The user's role in the current workspace: `owner`, `admin` or `developer`. */
  role?: string;
  /** Why the last session ended, in words (shown by the sign-in page). */
  notice?: string;
  /** Call once the client holds a new session (after `client.register`, `signIn` or `signInSecondFactor`). */
  start(): Promise<void>;
  /** Ends this session at the API and forgets it. */
  signOut(): Promise<void>;
  /** Forgets a session the API ended already (deactivation, a password reset, …), with the reason. */
  ended(notice: string): void;
  selectWorkspace(workspaceId: string): void;
  reloadAccount(): Promise<void>;
  reloadWorkspaces(): Promise<void>;
}

const SessionContext = createContext<Session | undefined>(undefined);

/** Why a 401 ended the session, by its error code (`token_expired` is renewed by the SDK instead). */
const endedBecause: Record<string, string> = {
  session_revoked: 'You were signed out: this session was ended from another place, or the password changed.',
  invalid_token: 'Your session has expired.',
  account_deactivated: 'This account is deactivated.',
};

async function errorCodeOf(response: Response): Promise<string | undefined> {
  try {
    const body = (await response.clone().json()) as { error?: { code?: unknown } };
    return typeof body.error?.code === 'string' ? body.error.code : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Set while this browser holds a session cookie (after a sign-in, until a sign-out or an ended
 * session), so a signed-out visit does not ask for a renewal that cannot work. No secret: the
 * cookie itself is out of the page's reach.
 */
const cookieSessionFlag = 'switchboard.session';

/** The tab's current workspace, so a reload stays in it (per tab: two tabs may work in two workspaces). */
const workspaceKey = 'switchboard.workspace';

/** Web storage may be refused (privacy settings): the session still works, a reload signs out. */
function store(storage: () => Storage, key: string, value: string | undefined): void {
  try {
    if (value === undefined) storage().removeItem(key);
    else storage().setItem(key, value);
  } catch {}
}

function stored(storage: () => Storage, key: string): string | undefined {
  try {
    return storage().getItem(key) ?? undefined;
  } catch {
    return undefined;
  }
}

const local = () => window.localStorage;
const tab = () => window.sessionStorage;

function rememberCookieSession(present: boolean): void {
  store(local, cookieSessionFlag, present ? '1' : undefined);
  if (!present) store(tab, workspaceKey, undefined);
}

const mayHaveCookieSession = () => stored(local, cookieSessionFlag) === '1';

async function loadWorkspaces(client: SwitchboardClient): Promise<Workspace[]> {
  const all = await paginate((after) => client.get('/v1/organizations', { params: { query: { limit: 100, after } } })).collect();
  return [...all.filter((workspace) => workspace.personal), ...all.filter((workspace) => !workspace.personal)];
}

export function SessionProvider({ children }: { children: ReactNode }) {
  const [status, setStatus] = useState<Session['status']>(() => (mayHaveCookieSession() ? 'restoring' : 'signed-out'));
  const [account, setAccount] = useState<Account>();
  const [workspaces, setWorkspaces] = useState<Workspace[]>([]);
  const [workspaceId, setWorkspaceId] = useState<string>();
  const [notice, setNotice] = useState<string>();
  // Read by the client's transport at request time, so it never sends a stale workspace.
  const workspaceRef = useRef<string | undefined>(undefined);
  const hooks = useRef({ ended: (_reason: string) => {}, workspaceLost: () => {} });

  const [client] = useState(() =>
    createSwitchboardClient({
      baseUrl: window.location.origin,
      sessionCookie: true,
      async fetch(request) {
        const signedRequest = request.headers.has('authorization');
        if (signedRequest && workspaceRef.current && !request.headers.has('x-workspace-id')) request.headers.set('x-workspace-id', workspaceRef.current);
        const response = await fetch(request);
        // The SDK renews an expired access token; any other 401 of a signed request (or of the
        // renewal itself) means the session is over: show the sign-in page with the reason.
        const renewal = new URL(request.url).pathname === '/v1/auth/refresh';
        if (response.status === 401 && (signedRequest || renewal)) {
          const reason = endedBecause[(await errorCodeOf(response)) ?? ''];
          if (reason) hooks.current.ended(reason);
        } else if (response.status === 404 && request.headers.has('x-workspace-id') && (await errorCodeOf(response)) === 'workspace_not_found') {
          hooks.current.workspaceLost();
        }
        return response;
      },
    }),
  );

  const ended = useCallback(
    (reason: string) => {
      client.setSession(undefined);
      rememberCookieSession(false);
      workspaceRef.current = undefined;
      setAccount(undefined);
      setWorkspaces([]);
      setWorkspaceId(undefined);
      setNotice(reason);
      setStatus('signed-out');
    },
    [client],
  );

  const reloadAccount = useCallback(async () => setAccount(await client.get('/v1/account')), [client]);

  const selectWorkspace = useCallback((id: string) => {
    workspaceRef.current = id;
    setWorkspaceId(id);
    store(tab, workspaceKey, id);
  }, []);

  const reloadWorkspaces = useCallback(async () => {
    const list = await loadWorkspaces(client);
    setWorkspaces(list);
    // No longer a member of the current one (removed, or it was deleted): the personal workspace, always listed, takes over.
    const personal = list.find((candidate) => candidate.personal);
    if (personal && !list.some((candidate) => candidate.org_id === workspaceRef.current)) selectWorkspace(personal.org_id);
  }, [client, selectWorkspace]);

  hooks.current = {
    ended,
    workspaceLost: () => {
      // Removed from the organization: back to the personal workspace, with the list refreshed.
      if (account) selectWorkspace(account.personal_workspace_id);
      void reloadWorkspaces().catch(() => {});
    },
  };

  const start = useCallback(async () => {
    setStatus('starting');
    setNotice(undefined);
    try {
      const [me, list] = await Promise.all([client.get('/v1/account'), loadWorkspaces(client)]);
      setAccount(me);
      setWorkspaces(list);
      // The tab's workspace before a reload, while the user is still a member; else the personal one.
      const previous = stored(tab, workspaceKey);
      const current = list.some((candidate) => candidate.org_id === previous) && previous ? previous : me.personal_workspace_id;
      workspaceRef.current = current;
      setWorkspaceId(current);
      rememberCookieSession(true);
      setStatus('signed-in');
    } catch (err) {
      client.setSession(undefined);
      setStatus('signed-out');
      throw err;
    }
  }, [client]);

  // A reload, or a return from the payment page: the cookie's session, renewed, signs the page in.
  const restoring = useRef(status === 'restoring');
  useEffect(() => {
    if (!restoring.current) return;
    restoring.current = false;
    client
      .refresh()
      .then(() => start())
      .catch(() => {
        // The cookie's session is over (the 401 told `ended` why) or the API is away: sign in again.
        rememberCookieSession(false);
        setStatus((current) => (current === 'restoring' ? 'signed-out' : current));
      });
  }, [client, start]);

  const signOut = useCallback(async () => {
    try {
      await client.signOut('local');
    } finally {
      ended('You signed out.');
    }
  }, [client, ended]);

  const value = useMemo<Session>(() => {
    const workspace = workspaces.find((candidate) => candidate.org_id === workspaceId);
    return {
      client,
      status,
      account,
      workspaces,
      workspace,
      role: workspace?.role,
      notice,
      start,
      signOut,
      ended,
      selectWorkspace,
      reloadAccount,
      reloadWorkspaces,
    };
  }, [client, status, account, workspaces, workspaceId, notice, start, signOut, ended, selectWorkspace, reloadAccount, reloadWorkspaces]);
  return <SessionContext.Provider value={value}>{children}</SessionContext.Provider>;
}

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession needs a SessionProvider above it');
  return session;
}

/** The session of a page that is only shown signed in: the account and workspace are there. */
export function useSignedIn(): Session & { account: Account; workspace: Workspace; role: string } {
  const session = useSession();
  const { account, workspace, role } = session;
  if (!account || !workspace || !role) throw new Error('useSignedIn on a page shown while signed out');
  return { ...session, account, workspace, role };
}
