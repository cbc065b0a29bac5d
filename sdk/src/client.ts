import createClient, { type Client, type MaybeOptionalInit, type ParseAsResponse } from 'openapi-fetch';
import type { HttpMethod, MediaType, PathsWithMethod, Readable, RequiredKeysOf, SuccessResponse } from 'openapi-typescript-helpers';
import { type Chat, createChat, createModels, type Models } from './chat.js';
import { isErrorBody, SwitchboardError } from './errors.js';
import { createResources, type Resources } from './resources.js';
import type { components, paths } from './schema.js';
import { type BackoffOptions, type CallSettings, createTransport, defaultMaxRetries, defaultTimeoutMs, type RequestOptions } from './transport.js';

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
  /** Milliseconds an attempt may wait for the answer's headers (default 60 000); each call may set its own. */
  timeout?: number;
  /** Retries of a call after its first attempt, on 429, 503 and connection failures (default 2); each call may set its own. */
  maxRetries?: number;
  /** The waits between attempts (tests inject their clock here). */
  backoff?: BackoffOptions;
}

/** The current credentials of a client. */
export interface Credentials {
  accessToken?: string;
  refreshToken?: string;
  apiKey?: string;
}

// The trailing parameter of openapi-fetch's methods: optional unless the operation needs params or a body.
// They also take the call's options (timeout, maxRetries, idempotencyKey, signal).
type CallInit<Init> = Init & Pick<RequestOptions, 'timeout' | 'maxRetries' | 'idempotencyKey'> & { [key: string]: unknown };
type InitParam<Init> = RequiredKeysOf<Init> extends never ? [CallInit<Init>?] : [CallInit<Init>];

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

export interface SwitchboardClient extends Omit<Resources, 'auth'> {
  /** Registration, sign-in (the client keeps the session), renewal, sign-out, password reset, email verification. */
  readonly auth: Resources['auth'] & {
    /** Renews the session now (`POST /v1/auth/refresh`), as `refresh()`. */
    refresh(): Promise<Session>;
    /** Ends the session, as `signOut(scope)`. */
    logout(scope?: 'local' | 'others' | 'global'): Promise<void>;
  };
  /** The OpenAI-compatible front door: `chat.completions.create` (docs/api/front-door.md). */
  readonly chat: Chat;
  /** The models the front door serves (`GET /v1/models`). */
  readonly models: Models;
  /**
   * The typed openapi-fetch client: its methods answer `{data, error, response}` instead of
   * throwing. Credentials, the workspace header and token refresh apply to it too.
   */
  readonly raw: Client<paths>;
  /**
   * GET by path: resolves to the success body; throws SwitchboardError on a non-2xx answer. The
   * resource methods (`keys`, `billing`, …) are built on these; they remain for routes by path.
   */
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
 * Requests carry `Authorization: Bearer <access token or API key>` and `X-Workspace-Id`. Every
 * call is retried on 429, 503 and connection failures (`maxRetries`, backoff with jitter,
 * `Retry-After` honoured), each POST with an `Idempotency-Key` of its own that its retries share.
 * When a request made with an access token answers 401 `token_expired` and the client holds a
 * refresh token, it calls `POST /v1/auth/refresh` once (one refresh for every request waiting on
 * it), stores the new session, calls `onSession`, and sends the request again once.
 */
export function createSwitchboardClient(options: SwitchboardClientOptions): SwitchboardClient {
  const state: Credentials = { accessToken: options.accessToken, refreshToken: options.refreshToken, apiKey: options.apiKey };
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const cookieMode = options.sessionCookie === true;
  const modeHeaders = cookieMode ? { [sessionModeHeader]: 'cookie' } : undefined;
  const fetchImpl = options.fetch ?? ((request: Request) => globalThis.fetch(request));
  const defaults = (call: RequestOptions = {}): CallSettings => ({
    timeout: call.timeout ?? options.timeout ?? defaultTimeoutMs,
    maxRetries: call.maxRetries ?? options.maxRetries ?? defaultMaxRetries,
    idempotencyKey: call.idempotencyKey,
    signal: call.signal,
    idempotent: true,
  });
  /** Whether an expired access token can be renewed: a refresh token in hand, or the cookie. */
  const renewable = () => cookieMode || state.refreshToken !== undefined;

  const authorize = (request: Request) => {
    const credential = state.accessToken ?? state.apiKey;
    if (credential && !request.headers.has('authorization')) request.headers.set('authorization', `Bearer ${credential}`);
    if (options.workspaceId && !request.headers.has('x-workspace-id')) request.headers.set('x-workspace-id', options.workspaceId);
  };
  const transport = createTransport({
    fetch: fetchImpl,
    backoff: options.backoff,
    authorize,
    async renewAfter(request, response) {
      const sent = request.headers.get('authorization')?.replace(/^Bearer /, '');
      if (!sent || sent === state.apiKey || !renewable() || (await errorCode(response)) !== 'token_expired') return false;
      // Another request may have renewed the session already; else renew it (or join the renewal in flight).
      if (state.accessToken === sent || refreshing) await refreshSession();
      return state.accessToken !== undefined && state.accessToken !== sent;
    },
  });
  // The refresh call itself never refreshes; it is retried like any POST (its Idempotency-Key
  // makes a retry after a lost answer get the same new session instead of a dead token).
  const bareTransport = createTransport({ fetch: fetchImpl, backoff: options.backoff, authorize: () => {} });

  const raw = createClient<paths>({ baseUrl, headers: modeHeaders, fetch: (request) => transport.send(request, defaults()) });
  const bare = createClient<paths>({ baseUrl, headers: modeHeaders, fetch: (request) => bareTransport.send(request, defaults()) });

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

  const request = raw.request as unknown as (
    method: HttpMethod,
    url: string,
    init?: Record<string, unknown>,
  ) => Promise<{ data?: unknown; error?: unknown; response: Response }>;
  /** One call by path: the call's options go to the transport, the rest to openapi-fetch. */
  async function call(method: HttpMethod, url: string, init: Record<string, unknown> = {}): Promise<unknown> {
    const { timeout, maxRetries, idempotencyKey, signal, workspaceId, headers, ...rest } = init as RequestOptions & Record<string, unknown>;
    const settings = defaults({ timeout, maxRetries, idempotencyKey, signal });
    const extra = { ...headers, ...(workspaceId ? { 'x-workspace-id': workspaceId } : {}) };
    const { data, error, response } = await request(method, url, { ...rest, headers: extra, fetch: (req: Request) => transport.send(req, settings) });
    if (!response.ok) throw SwitchboardError.fromResponse(response, error);
    return data;
  }
  const dataMethod = (method: HttpMethod) => ((url: string, init?: Record<string, unknown>) => call(method, url, init)) as unknown;

  const resources = createResources({ call, storeSession });
  const client: SwitchboardClient = {
    ...resources,
    auth: { ...resources.auth, refresh: () => refreshSession(), logout: (scope) => client.signOut(scope) },
    chat: createChat({ baseUrl, transport, settings: defaults }),
    models: createModels(call),
    raw,
    get: dataMethod('get') as DataMethod<'get'>,
    post: dataMethod('post') as DataMethod<'post'>,
    put: dataMethod('put') as DataMethod<'put'>,
    patch: dataMethod('patch') as DataMethod<'patch'>,
    delete: dataMethod('delete') as DataMethod<'delete'>,

    register: (body) => resources.auth.register(body),
    signIn: (body) => resources.auth.login(body),
    signInSecondFactor: (body) => resources.auth.loginSecondFactor(body),
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
