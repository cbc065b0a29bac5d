import createClient, { type Client, type MaybeOptionalInit, type Middleware, type ParseAsResponse } from 'openapi-fetch';
import type { HttpMethod, MediaType, PathsWithMethod, Readable, RequiredKeysOf, SuccessResponse } from 'openapi-typescript-helpers';
import { isErrorBody, SwitchboardError } from './errors.js';
import type { components, paths } from './schema.js';

/** The request header of the cookie mode (SwitchboardClientOptions.sessionCookie). */
const sessionModeHeader = 'X-Switchboard-Session';

/** Every schema of the API, by its name in the document (e.g. `Schemas['switchboard.keys.v1.Key']`). */
export type Schemas = components['schemas'];
/** A session: a 15-minute access token and the refresh token that renews it. */
export type Session = Schemas['switchboard.identity.v1.Session'];

/** What the client needs to send requests; every credential is optional (public routes need none). */
export interface SwitchboardClientOptions {
  /** The gateway's origin, e.g. `https://api.example.com` (paths start with `/v1`). */
  baseUrl: string;
  /** A user access token (from sign-in, registration or refresh). */
  accessToken?: string;
  /** The refresh token of the session: with it, an expired access token is renewed transparently. */
  refreshToken?: string;
  /** An API key `sb_…`; used when there is no access token. */
  apiKey?: string;
  /** Sent as `X-Workspace-Id` on every request that does not set it itself (an organization id). */
  workspaceId?: string;
  /**
   * Called with every new session the client stores (registration, sign-in, refresh), before
   * the request that caused it continues: persist the tokens here. A refresh token works once, so
   * the previous one is dead by then.
   */
  onSession?: (session: Session) => void | Promise<void>;
  /** The fetch to use (default: the global fetch). */
  fetch?: (input: Request) => Promise<Response>;
  /**
   * For a browser page on the gateway's own origin (the dashboard): the refresh token lives in an
   * HttpOnly cookie the gateway sets, never in the page's memory. Every request says
   * `X-Switchboard-Session: cookie`; sessions the client stores have no `refresh_token`, and
   * `refresh()` (also the one on `token_expired`) renews from the cookie, so a reloaded page
   * gets its session back with `refresh()`. See docs/api/identity.md#the-dashboards-session-cookie.
   */
  sessionCookie?: boolean;
}

/** The current credentials of a client. */
export interface Credentials {
  accessToken?: string;
  refreshToken?: string;
  apiKey?: string;
}

// The trailing parameter of openapi-fetch's methods: optional unless the operation needs params or a body.
type InitParam<Init> = RequiredKeysOf<Init> extends never ? [(Init & { [key: string]: unknown })?] : [Init & { [key: string]: unknown }];

/** The parsed success body of an operation (undefined for 204 answers). */
export type SuccessData<Operation, Init = unknown> = Operation extends { responses: infer Responses extends Record<string | number, unknown> }
  ? ParseAsResponse<Readable<SuccessResponse<Responses, MediaType>>, Init>
  : never;

/** A method that resolves to the success body and throws SwitchboardError for any other answer. */
export type DataMethod<Method extends HttpMethod> = <Path extends PathsWithMethod<paths, Method>, Init extends MaybeOptionalInit<paths[Path], Method>>(
  url: Path,
  ...init: InitParam<Init>
) => Promise<SuccessData<paths[Path][Method], Init>>;

type Body<Path extends keyof paths, Method extends HttpMethod> = NonNullable<MaybeOptionalInit<paths[Path], Method>>['body'];

export interface SwitchboardClient {
  /**
   * The typed openapi-fetch client: its methods answer `{data, error, response}` instead of
   * throwing. Credentials, the workspace header and token refresh apply to it too.
   */
  readonly raw: Client<paths>;
  /** GET: resolves to the success body; throws SwitchboardError on a non-2xx answer. */
  readonly get: DataMethod<'get'>;
  readonly post: DataMethod<'post'>;
  readonly put: DataMethod<'put'>;
  readonly patch: DataMethod<'patch'>;
  readonly delete: DataMethod<'delete'>;

  /** Creates an account (201 `{user, session}`) and signs in with its session. */
  register(body: Body<'/v1/auth/register', 'post'>): Promise<Schemas['switchboard.identity.v1.RegisterResponse']>;
  /**
   * Signs in with email and password. Without 2FA the answer holds the session, which the client
   * now uses; with 2FA it is `{mfa_required: true, mfa_token}`: finish with `signInSecondFactor`.
   */
  signIn(body: Body<'/v1/auth/login', 'post'>): Promise<Schemas['switchboard.identity.v1.LoginResponse']>;
  /** Completes a sign-in that answered `mfa_required` (a TOTP `code` or a `recovery_code`). */
  signInSecondFactor(body: Body<'/v1/auth/login/2fa', 'post'>): Promise<Schemas['switchboard.identity.v1.LoginSecondFactorResponse']>;
  /** Renews the session now with its refresh token (also done by itself on `token_expired`). */
  refresh(): Promise<Session>;
  /** Ends the session (`scope`: `local` by default, `others` or `global`) and forgets its tokens unless `others`. */
  signOut(scope?: 'local' | 'others' | 'global'): Promise<void>;
  /** Uses `session` from now on (e.g. tokens restored from storage); undefined forgets the current one. */
  setSession(session: (Pick<Session, 'access_token'> & Partial<Pick<Session, 'refresh_token'>>) | undefined): void;
  /** The credentials the client currently sends. */
  credentials(): Credentials;
}

/**
 * A client of the Switchboard REST API, typed from its OpenAPI document.
 *
 * Requests carry `Authorization: Bearer <access token or API key>` and `X-Workspace-Id`. When a
 * request made with an access token answers 401 `token_expired` and the client holds a refresh
 * token, it calls `POST /v1/auth/refresh` once (one refresh for every request waiting on it),
 * stores the new session, calls `onSession`, and sends the request again once.
 */
export function createSwitchboardClient(options: SwitchboardClientOptions): SwitchboardClient {
  const state: Credentials = { accessToken: options.accessToken, refreshToken: options.refreshToken, apiKey: options.apiKey };
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const cookieMode = options.sessionCookie === true;
  const modeHeaders = cookieMode ? { [sessionModeHeader]: 'cookie' } : undefined;
  const raw = createClient<paths>({ baseUrl, headers: modeHeaders, ...(options.fetch ? { fetch: options.fetch } : {}) });
  // The refresh call itself goes around the middleware: it must never refresh or retry.
  const bare = createClient<paths>({ baseUrl, headers: modeHeaders, ...(options.fetch ? { fetch: options.fetch } : {}) });
  /** Whether an expired access token can be renewed: a refresh token in hand, or the cookie. */
  const renewable = () => cookieMode || state.refreshToken !== undefined;

  async function storeSession(session: Session): Promise<void> {
    state.accessToken = session.access_token;
    state.refreshToken = session.refresh_token;
    await options.onSession?.(session);
  }

  let refreshing: Promise<Session> | undefined;
  /** One refresh at a time: concurrent callers share the one in flight. */
  function refreshSession(): Promise<Session> {
    refreshing ??= (async () => {
      try {
        const refreshToken = state.refreshToken;
        if (!refreshToken && !cookieMode) throw new Error('createSwitchboardClient: no refresh token to renew the session with');
        // In the cookie mode the gateway reads the token from the cookie (the body names none).
        const body = (refreshToken ? { refresh_token: refreshToken } : {}) as { refresh_token: string };
        const { data, error, response } = await bare.POST('/v1/auth/refresh', { body });
        if (!response.ok || !data?.session) {
          // 401: the refresh token is dead (used, or its session ended); sign in again.
          if (response.status === 401 && state.refreshToken === refreshToken) {
            state.accessToken = undefined;
            state.refreshToken = undefined;
          }
          throw SwitchboardError.fromResponse(response, error);
        }
        await storeSession(data.session);
        return data.session;
      } finally {
        refreshing = undefined;
      }
    })();
    return refreshing;
  }

  /** Per request id: a copy of the request to send again, and the access token it carried. */
  const replays = new Map<string, { request: Request; accessToken: string }>();
  const auth: Middleware = {
    onRequest({ request, id }) {
      const credential = state.accessToken ?? state.apiKey;
      if (credential && !request.headers.has('authorization')) request.headers.set('authorization', `Bearer ${credential}`);
      if (options.workspaceId && !request.headers.has('x-workspace-id')) request.headers.set('x-workspace-id', options.workspaceId);
      const accessToken = state.accessToken;
      if (accessToken && renewable() && request.headers.get('authorization') === `Bearer ${accessToken}`) {
        // A body can be read once: keep an unread copy in case the request must be sent again.
        replays.set(id, { request: request.clone(), accessToken });
      }
      return request;
    },
    async onResponse({ response, id, options: merged }) {
      const replay = replays.get(id);
      replays.delete(id);
      if (!replay || response.status !== 401 || (await errorCode(response)) !== 'token_expired') return undefined;
      // Another request may have renewed the session already; else renew it (or join the renewal in flight).
      if (state.accessToken === replay.accessToken || refreshing) {
        try {
          await refreshSession();
        } catch (err) {
          if (err instanceof SwitchboardError) return errorResponse(err);
          throw err;
        }
      }
      if (!state.accessToken) return undefined;
      replay.request.headers.set('authorization', `Bearer ${state.accessToken}`);
      return merged.fetch(replay.request);
    },
    onError({ id }) {
      replays.delete(id);
    },
  };
  raw.use(auth);

  const dataMethod = (method: HttpMethod) =>
    (async (url: string, init?: Record<string, unknown>) => {
      const request = raw.request as unknown as (
        method: HttpMethod,
        url: string,
        init?: Record<string, unknown>,
      ) => Promise<{ data?: unknown; error?: unknown; response: Response }>;
      const { data, error, response } = await request(method, url, init);
      if (!response.ok) throw SwitchboardError.fromResponse(response, error);
      return data;
    }) as unknown;

  const client: SwitchboardClient = {
    raw,
    get: dataMethod('get') as DataMethod<'get'>,
    post: dataMethod('post') as DataMethod<'post'>,
    put: dataMethod('put') as DataMethod<'put'>,
    patch: dataMethod('patch') as DataMethod<'patch'>,
    delete: dataMethod('delete') as DataMethod<'delete'>,

    async register(body) {
      const answer = await client.post('/v1/auth/register', { body });
      if (answer.session) await storeSession(answer.session);
      return answer;
    },
    async signIn(body) {
      const answer = await client.post('/v1/auth/login', { body });
      if (answer.session) await storeSession(answer.session);
      return answer;
    },
    async signInSecondFactor(body) {
      const answer = await client.post('/v1/auth/login/2fa', { body });
      if (answer.session) await storeSession(answer.session);
      return answer;
    },
    refresh: refreshSession,
    async signOut(scope = 'local') {
      await client.post('/v1/auth/logout', { body: { scope } });
      if (scope !== 'others') {
        state.accessToken = undefined;
        state.refreshToken = undefined;
      }
    },
    setSession(session) {
      state.accessToken = session?.access_token;
      state.refreshToken = session?.refresh_token;
    },
    credentials() {
      return { ...state };
    },
  };
  return client;
}

/** The `error.code` of an answer, read from a copy so the body stays unread. */
async function errorCode(response: Response): Promise<string | undefined> {
  try {
    const body: unknown = await response.clone().json();
    return isErrorBody(body) ? body.error.code : undefined;
  } catch {
    return undefined;
  }
}

/** The answer to hand back when the refresh failed: the refresh's own error. */
function errorResponse(error: SwitchboardError): Response {
  const headers = new Headers({ 'content-type': 'application/json' });
  if (error.requestId) headers.set('x-request-id', error.requestId);
  if (error.retryAfter !== null) headers.set('retry-after', String(error.retryAfter));
  const body =
    typeof error.body === 'string'
      ? error.body
      : JSON.stringify(error.body ?? { error: { code: error.code, message: error.message, field: error.field, request_id: error.requestId ?? '' } });
  return new Response(body, { status: error.status, headers });
}
