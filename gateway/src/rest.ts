import type http from 'node:http';
import type http2 from 'node:http2';
import { create, type DescField, type JsonValue, type Message } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import type { ServiceName } from '@switchboard/contracts/components';
import { type HttpBody, HttpBodySchema } from '@switchboard/contracts/google/api/httpbody_pb';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { ApiError } from '@switchboard/runtime/api-error';
import { type AuditRecord, audit } from '@switchboard/runtime/audit';
import type { UnaryClient } from '@switchboard/runtime/clients';
import { catalogued, errorCatalogue } from '@switchboard/runtime/error-catalogue';
import { type ErrorBody, toHttpError } from '@switchboard/runtime/errors';
import { readBody } from '@switchboard/runtime/http-body';
import { newId } from '@switchboard/runtime/ids';
import { type AddressRanges, forwardedClientIp } from '@switchboard/runtime/ip';
import type { Logger } from '@switchboard/runtime/log';
import { type MeshTokens, userAgentLimit } from '@switchboard/runtime/mesh-token';
import type { Metrics } from '@switchboard/runtime/metrics';
import {
  changedKeyHeader,
  changedWorkspaceHeader,
  contentSecurityPolicyHeader,
  revokedSessionsHeader,
  statusOverrideHeader,
} from '@switchboard/runtime/server';
import { nameHttpRoute } from '@switchboard/runtime/trace-context';
import type { Authenticator, Principal, Workspace } from './auth.js';
import { decodeRequest, encodeResponse, InputError } from './codec.js';
import { type Answer, type IdempotencyStore, idempotencyKeyOf } from './idempotency.js';
import type { RateLimiter } from './rate-limits.js';
import type { Router } from './router.js';
import type { Route } from './routes.js';
import { clearRefreshCookie, endsOwnSession, isRefresh, issuesSession, moveRefreshTokenToCookie, refreshTokenOfCookie, wantsCookie } from './session-cookie.js';

export const maxBodyBytes = 1024 * 1024;
/** Deadline of one service call made for a REST request. */
export const callTimeoutMs = 10_000;
/** Request headers that fill request fields of the same meaning (raw-body provider webhooks). */
const headerFields: Record<string, string> = { stripe_signature: 'stripe-signature' };

export interface RestOptions {
  router: Router;
  authenticator: Authenticator;
  clients: Record<ServiceName, UnaryClient>;
  meshTokens: MeshTokens;
  log: Logger;
  /** The proxies whose X-Forwarded-For is believed (GATEWAY_TRUSTED_PROXIES); none by default. */
  trustedProxies?: AddressRanges;
  /** Where each request's latency and status are counted. */
  metrics: Metrics;
  /**
   * Where the gateway's own refusals of a principal in a workspace go as audit records
   * (`access.denied`, runtime/src/audit-publisher.ts): best effort, never waited on. Without it,
   * the audit log line only.
   */
  audit?: { publish(record: AuditRecord): void };
  /** The REST rate limits (docs/conventions.md#rate-limits); none without it. */
  rateLimiter?: RateLimiter;
  /**
   * Where Idempotency-Key answers are kept (docs/conventions.md#idempotency); without it a POST
   * with the header is a 503 (never run unprotected).
   */
  idempotency?: IdempotencyStore;
  /**
   * Built-in endpoints (health, OpenAPI, docs, the dashboard): true when handled, or the route to
   * log and count it under when the path itself is not bounded (the dashboard's pages).
   */
  builtIn(req: http.IncomingMessage, res: http.ServerResponse, pathname: string, requestId: string, clientIp: string | undefined): Promise<boolean | string>;
}

const requestIdPattern = /^[\w.:-]{1,128}$/;
const knownMethods = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Headers of every response (OWASP ASVS 3.4, 13.x): an API answer is never sniffed, framed or
 * given a referrer; pages with HTML (/docs, and service pages through contentSecurityPolicyHeader)
 * set a CSP of their own over this one.
 */
const securityHeaders: ReadonlyArray<[string, string]> = [
  ['X-Content-Type-Options', 'nosniff'],
  ['Referrer-Policy', 'no-referrer'],
  ['Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'"],
];
const hsts = 'max-age=31536000; includeSubDomains';

/** What the request log line says of a request once it is answered. */
interface RequestFacts {
  route: string;
  clientIp?: string;
  principal?: Principal;
}

/** The REST surface: every request is authenticated, translated to an RPC, and translated back. */
export function createRestHandler(options: RestOptions): http.RequestListener {
  const { log } = options;
  // The request line's fields are fixed and never secret: the redaction of secret fields, which
  // pino runs on every value of a line (~170 µs a line, more than the rest of a forwarded request),
  // has nothing to find there.
  const requestLog = log.child({}, { redact: { paths: [] } });
  const duration = options.metrics.histogram('http_server_duration_seconds', 'Requests answered, by method, route template and status.', [
    'method',
    'route',
    'status',
  ]);
  return (req, res) => {
    const started = performance.now();
    const incomingId = req.headers['x-request-id'];
    const requestId = typeof incomingId === 'string' && requestIdPattern.test(incomingId) ? incomingId : newId('req');
    res.setHeader('X-Request-Id', requestId);
    for (const [name, value] of securityHeaders) res.setHeader(name, value);
    const clientIp = clientIpOf(req, options.trustedProxies);
    if (overTls(req, options.trustedProxies)) res.setHeader('Strict-Transport-Security', hsts);
    const facts: RequestFacts = { route: '-', clientIp };
    handle(options, req, res, requestId, facts)
      .catch((err) => sendError(res, err, requestId, log))
      .finally(() => {
        const seconds = (performance.now() - started) / 1000;
        // Labels stay bounded: the route is a template or a built-in path, never the raw URL.
        duration.observe({ method: knownMethods.has(req.method ?? '') ? req.method : 'other', route: facts.route, status: res.statusCode }, seconds);
        if (!requestLog.isLevelEnabled('info')) return;
        requestLog.info(
          {
            request_id: requestId,
            method: req.method,
            route: facts.route,
            status: res.statusCode,
            ms: Math.round(seconds * 1000),
            client_ip: facts.clientIp,
            principal_type: facts.principal?.type,
            user_id: facts.principal?.userId,
            key_id: facts.principal?.keyId,
          },
          'request',
        );
      });
  };
}

/** HTTPS to the gateway itself, or to a trusted proxy in front of it that says so. */
function overTls(req: http.IncomingMessage, trustedProxies?: AddressRanges): boolean {
  if ((req.socket as { encrypted?: boolean }).encrypted) return true;
  const proto = req.headers['x-forwarded-proto'];
  const socketAddress = req.socket.remoteAddress;
  return typeof proto === 'string' && proto.split(',')[0].trim() === 'https' && !!socketAddress && !!trustedProxies?.has(socketAddress);
}

async function handle(options: RestOptions, req: http.IncomingMessage, res: http.ServerResponse, requestId: string, facts: RequestFacts): Promise<void> {
  const onRoute = (template: string) => {
    facts.route = template;
    nameHttpRoute(req.method ?? 'GET', template);
  };
  let url: URL;
  try {
    // Concatenated, not resolved: a path like //host/x must stay a path, never name a host.
    url = new URL(`http://gateway${req.url?.startsWith('/') ? req.url : `/${req.url ?? ''}`}`);
  } catch {
    throw catalogued(errorCatalogue.invalidRequest, { problem: 'The request URL is malformed.' });
  }
  const builtIn = await options.builtIn(req, res, url.pathname, requestId, facts.clientIp);
  if (builtIn) {
    onRoute(typeof builtIn === 'string' ? builtIn : url.pathname);
    return;
  }
  // HEAD is a GET without the body (Node leaves the body out).
  const match = options.router.match(req.method === 'HEAD' ? 'GET' : (req.method ?? 'GET'), url.pathname);
  if (!match) throw catalogued(errorCatalogue.routeNotFound, { method: req.method, path: url.pathname });
  if ('allowed' in match) {
    throw catalogued(errorCatalogue.methodNotAllowed, { method: req.method, allowed: match.allowed }, { headers: { Allow: match.allowed.join(', ') } });
  }
  const { route, pathValues } = match;
  onRoute(route.template);
  // docs/conventions.md#rate-limits: routes without credentials count per client address.
  if (route.credentials === 'none') options.rateLimiter?.take(res, undefined, facts.clientIp);

  // Order of checks (docs/conventions.md#order-of-checks): credentials (with an API key's scope), then the workspace, then the input.
  let principal: Principal | undefined;
  let workspace: Workspace | undefined;
  if (route.credentials !== 'none') {
    principal = await options.authenticator.authenticate(req.headers.authorization, { ip: facts.clientIp, requestId }).catch((err: unknown) => {
      // docs/conventions.md#rate-limits: refused credentials have no principal; they count for the client address
      // (a flood of made-up keys or tokens is slowed like any caller without credentials).
      if (err instanceof ApiError && err.status === 401) options.rateLimiter?.take(res, undefined, facts.clientIp);
      throw err;
    });
    facts.principal = principal;
    // docs/conventions.md#rate-limits: every authenticated request counts for its principal, refused or not.
    options.rateLimiter?.take(res, principal, facts.clientIp);
    if (route.credentials === 'user_session' && principal.type === 'key') {
      refusedKey(options, route, principal, facts.clientIp, requestId, errorCatalogue.userSessionRequired.code);
      throw catalogued(errorCatalogue.userSessionRequired);
    }
    // docs/conventions.md#order-of-checks: an API key's scope is a fact of the credential, checked with it, before
    // the workspace and the input; the service checks it again (runtime/src/policy.ts guardRpc).
    if (principal.type === 'key') assertScope(options, route, principal, facts.clientIp, requestId);
    const requested = req.headers['x-workspace-id'];
    const pathWorkspace = workspaceOfPath(pathValues);
    workspace =
      pathWorkspace === undefined
        ? await options.authenticator.resolveWorkspace(principal, typeof requested === 'string' && requested ? requested : undefined, { requestId })
        : await resolvePathWorkspace(options.authenticator, principal, pathWorkspace, typeof requested === 'string' ? requested : undefined, requestId);
  }

  // docs/api/identity.md#the-dashboards-session-cookie: only with the opt-in header is the cookie read or written.
  const cookieMode = wantsCookie(req);
  let input: Message;
  let raw: Buffer | undefined;
  let idempotencyKey: string | undefined;
  try {
    // docs/conventions.md#idempotency: every POST of the REST surface takes an Idempotency-Key, checked with the input.
    if (route.httpMethod === 'POST') idempotencyKey = idempotencyKeyOf(req.headers['idempotency-key']);
    ({ input, raw } = await readInput(route, req, url.searchParams, pathValues));
    if (cookieMode && isRefresh(route)) {
      const refresh = input as Message & { refreshToken: string };
      if (!refresh.refreshToken) refresh.refreshToken = refreshTokenOfCookie(req) ?? '';
    }
  } catch (err) {
    // Order of checks (docs/conventions.md#order-of-checks): an organization in the path the caller cannot see is a 404
    // before anything about the input.
    if (principal) await assertPathWorkspaceVisible(options.authenticator, principal, workspace!, pathValues, requestId);
    throw err;
  }
  const abort = new AbortController();
  // Cancel the call without an Idempotency-Key, or the wait for another request's answer, when the client
  // goes away (aborting after a normal end would cost a DOMException per request).
  res.once('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  const execute = (signal?: AbortSignal) =>
    callService(options, req, res, { route, input, principal, workspace, cookieMode, requestId, clientIp: facts.clientIp }, signal).catch((err: unknown) =>
      errorAnswer(err, requestId, options.log),
    );
  if (!idempotencyKey) {
    sendAnswer(res, await execute(abort.signal));
    return;
  }
  if (!options.idempotency) throw catalogued(errorCatalogue.serviceUnavailable, { dependency: 'store of Idempotency-Key answers' });
  const { answer, replayed } = await options.idempotency.run(
    {
      key: idempotencyKey,
      // docs/conventions.md#idempotency: a key belongs to its principal and workspace, or without credentials to the client address.
      scope: principal
        ? `${principal.keyId ? `key:${principal.keyId}` : `user:${principal.userId}`} ${workspace?.workspaceId ?? '-'}`
        : `ip:${facts.clientIp ?? '-'}`,
      route: `${route.httpMethod} ${route.template}`,
      path: url.pathname,
      query: url.search,
      body: raw,
      requestId,
    },
    // docs/conventions.md#idempotency: a call with a key runs to its end even when its client goes away, and
    // its answer is kept, so the client's retry (after a dropped connection) gets it instead of a second run.
    () => execute(),
    abort.signal,
  );
  if (replayed) res.setHeader('Idempotent-Replayed', 'true');
  sendAnswer(res, answer);
}

/** What one call of a service needs from the request it is made for. */
interface CallFacts {
  route: Route;
  input: Message;
  principal?: Principal;
  workspace?: Workspace;
  cookieMode: boolean;
  requestId: string;
  clientIp?: string;
}

/** Calls the route's RPC for the request and gives its answer (a refusal of the service throws). */
async function callService(
  options: RestOptions,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  { route, input, principal, workspace, cookieMode, requestId, clientIp }: CallFacts,
  signal: AbortSignal | undefined,
): Promise<Answer> {
  const token = await options.meshTokens.mint(route.owner, {
    caller: 'gateway',
    clientIp,
    principalId: principal?.userId,
    principalType: principal?.type,
    sessionId: principal?.sessionId,
    keyId: principal?.keyId,
    scopes: principal?.scopes,
    workspaceId: workspace?.workspaceId,
    role: workspace?.role,
    // Identity keeps it on the sessions it opens (the user's list of sessions); other services have no use for it.
    userAgent: route.owner === 'identity' ? userAgentOf(req) : undefined,
  });
  const tls = overTls(req, options.trustedProxies);
  let response: Awaited<ReturnType<UnaryClient['call']>>;
  try {
    response = await options.clients[route.owner].call(
      route.method,
      input,
      { authorization: `Bearer ${token}`, 'x-request-id': requestId },
      callTimeoutMs,
      signal,
    );
  } catch (err) {
    // A refresh token that no longer works (revoked, reused, ended) leaves no cookie behind. Only
    // identity's own refusal (it carries the error detail) says so: a refused mesh token is the
    // gateway's fault, answered 503 below, and must not sign every dashboard user out.
    if (cookieMode && isRefresh(route) && refusedCredentials(ConnectError.from(err))) clearRefreshCookie(req, res, tls);
    throw err;
  }
  const revoked = response.header[revokedSessionsHeader];
  if (typeof revoked === 'string' && revoked) options.authenticator.revokedSessions.add(revoked.split(','));
  const changedWorkspace = response.header[changedWorkspaceHeader];
  if (typeof changedWorkspace === 'string' && changedWorkspace) options.authenticator.forgetWorkspace(changedWorkspace);
  const changedKey = response.header[changedKeyHeader];
  if (typeof changedKey === 'string' && changedKey) options.authenticator.forgetKey(changedKey);
  // Only a status the contract lists (RestRule.other_successes) replaces the route's own.
  const override = Number(response.header[statusOverrideHeader]);
  const status = route.otherSuccesses.some((other) => other.status === override) ? override : route.successStatus;
  if (cookieMode && issuesSession(route)) moveRefreshTokenToCookie(req, res, response.message, tls);
  if (cookieMode && endsOwnSession(route, input)) clearRefreshCookie(req, res, tls);
  return resultAnswer(route, status, response.message, pagePolicyOf(response.header));
}

/** 403 `insufficient_scope` for an API key without any scope the route accepts (docs/api/keys.md#scopes), naming its own. */
function assertScope(options: Pick<RestOptions, 'log' | 'audit'>, route: Route, principal: Principal, clientIp: string | undefined, requestId: string): void {
  if (route.acceptedScopes.some((scope) => principal.scopes?.includes(scope))) return;
  refusedKey(options, route, principal, clientIp, requestId, errorCatalogue.insufficientScope.code, { required_scope: route.scope });
  throw catalogued(errorCatalogue.insufficientScope, { metadata: { required_scope: route.scope } });
}

/**
 * An API key refused by the gateway itself (the call never reaches a service): an `access.denied`
 * record in the key's workspace (docs/api/audit.md), which writes the audit line (ASVS 16.3) as
 * the services' refusals do (runtime/src/policy.ts); without a publisher, the line alone.
 */
function refusedKey(
  options: Pick<RestOptions, 'log' | 'audit'>,
  route: Route,
  principal: Principal,
  clientIp: string | undefined,
  requestId: string,
  reason: string,
  details: Record<string, string> = {},
): void {
  const routeName = `${route.httpMethod} ${route.template}`;
  if (options.audit && principal.keyId && principal.keyWorkspaceId) {
    options.audit.publish({
      action: 'access.denied',
      outcome: 'denied',
      actor: { type: 'api_key', id: principal.keyId, ip: clientIp },
      target: { type: 'route', id: routeName },
      workspaceId: principal.keyWorkspaceId,
      requestId,
      subjectUserId: principal.userId,
      metadata: { reason, route: routeName, ...details },
    });
    return;
  }
  audit(options.log, {
    event: 'authorization',
    outcome: 'denied',
    userId: principal.userId,
    ip: clientIp,
    requestId,
    reason,
    details: { key_id: principal.keyId, route: routeName, ...details },
  });
}

/** The client's User-Agent, bounded: a mesh token carries it and a session row keeps it. */
function userAgentOf(req: http.IncomingMessage): string | undefined {
  return req.headers['user-agent']?.slice(0, userAgentLimit) || undefined;
}

/**
 * The Content-Security-Policy a service gave for the page it answered (contentSecurityPolicyHeader),
 * only when it still starts from deny-all and forbids framing; otherwise the default stays.
 */
function pagePolicyOf(header: http2.IncomingHttpHeaders): string | undefined {
  const policy = header[contentSecurityPolicyHeader];
  if (typeof policy !== 'string') return undefined;
  const directives = policy.split(';').map((directive) => directive.trim().toLowerCase());
  return directives[0] === "default-src 'none'" && directives.includes("frame-ancestors 'none'") ? policy : undefined;
}

/** The client's address: the socket's, or the one trusted proxies put in X-Forwarded-For. */
export function clientIpOf(req: http.IncomingMessage, trustedProxies?: AddressRanges): string | undefined {
  const forwarded = req.headers['x-forwarded-for'];
  return forwardedClientIp(req.socket.remoteAddress, typeof forwarded === 'string' ? forwarded : undefined, trustedProxies);
}

/** Path variables that name a workspace (an organization). */
const workspacePathFields = new Set(['org_id', 'workspace_id']);

/** The same 404 identity gives for an organization the caller cannot see. */
const organizationNotFound = () => catalogued(errorCatalogue.organizationNotFound);

/** The `workspace_id` of a route that acts in the workspace of its path (webhooks), if any. */
function workspaceOfPath(pathValues: Map<DescField, string>): string | undefined {
  for (const [field, value] of pathValues) if (field.name === 'workspace_id') return value;
  return undefined;
}

/**
 * A route with `{workspace_id}` acts in that workspace, whatever X-Workspace-Id says: the caller's
 * role there goes into the mesh token. A workspace the caller is not a member of, or another
 * workspace than an API key's own, is a 404 (never reveal whether it exists).
 */
async function resolvePathWorkspace(
  authenticator: Authenticator,
  principal: Principal,
  workspaceId: string,
  requested: string | undefined,
  requestId: string,
): Promise<Workspace> {
  // docs/conventions.md#workspaces: an API key naming another workspace in X-Workspace-Id is a 403, whatever the path.
  if (principal.type === 'key' && requested) await authenticator.resolveWorkspace(principal, requested, { requestId });
  if (principal.type === 'key' && workspaceId !== principal.keyWorkspaceId) throw organizationNotFound();
  return authenticator.resolveWorkspace(principal, workspaceId, { requestId }).catch((err: unknown) => {
    throw err instanceof ApiError && err.status === 404 ? organizationNotFound() : err;
  });
}

async function assertPathWorkspaceVisible(
  authenticator: Authenticator,
  principal: Principal,
  workspace: Workspace,
  pathValues: Map<DescField, string>,
  requestId: string,
) {
  for (const [field, value] of pathValues) {
    if (!workspacePathFields.has(field.name) || value === workspace.workspaceId) continue;
    if (principal.type === 'key') throw organizationNotFound();
    await authenticator.resolveWorkspace(principal, value, { requestId }).catch((err: unknown) => {
      throw err instanceof ApiError && err.status === 404 ? organizationNotFound() : err;
    });
  }
}

/** The request's input message, and the body's bytes as received (an Idempotency-Key's fingerprint covers them). */
async function readInput(
  route: Route,
  req: http.IncomingMessage,
  query: URLSearchParams,
  pathValues: Map<DescField, string>,
): Promise<{ input: Message; raw: Buffer | undefined }> {
  let body: JsonValue | undefined;
  const hasBody = route.body !== '';
  const raw = hasBody ? await readBody(req, maxBodyBytes, tooLarge) : undefined;
  const rawBodyField = route.body && route.body !== '*' ? route.method.input.fields.find((f) => f.name === route.body) : undefined;
  const wantsRawBody = rawBodyField?.fieldKind === 'message' && rawBodyField.message.typeName === 'google.api.HttpBody';
  if (raw && raw.length > 0 && !wantsRawBody) {
    const contentType = req.headers['content-type'] ?? '';
    if (!/^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(contentType)) {
      throw catalogued(errorCatalogue.unsupportedMediaType);
    }
    try {
      body = JSON.parse(raw.toString('utf8')) as JsonValue;
    } catch {
      throw catalogued(errorCatalogue.invalidJson);
    }
  }
  const message = decodeRequest(route, pathValues, query, body) as Message & Record<string, unknown>;
  if (wantsRawBody && raw) {
    const localName = rawBodyField!.localName;
    message[localName] = create(HttpBodySchema, { contentType: req.headers['content-type'] ?? '', data: raw });
  }
  for (const [fieldName, header] of Object.entries(headerFields)) {
    const field = route.method.input.fields.find((f) => f.name === fieldName);
    const value = req.headers[header];
    if (field && typeof value === 'string') message[field.localName] = value;
  }
  return { input: message, raw };
}

const HTTP_BODY_TYPE = 'google.api.HttpBody';

const tooLarge = () => catalogued(errorCatalogue.payloadTooLarge, { limitBytes: maxBodyBytes });

/** The answer of a successful call: its record as JSON, a page, or a raw body (a report's CSV). */
function resultAnswer(route: Route, status: number, message: Message, pagePolicy?: string): Answer {
  const headers: Record<string, string> = { ...noStore };
  if (status === 204) return { status, headers, body: Buffer.alloc(0) };
  if (route.method.output.typeName === HTTP_BODY_TYPE) {
    const page = message as HttpBody;
    // A page may bring its own CSP (e.g. a nonce for its inline script); JSON answers never do.
    if (pagePolicy) headers['Content-Security-Policy'] = pagePolicy;
    return { status, headers: { ...headers, 'Content-Type': page.contentType || 'application/octet-stream' }, body: Buffer.from(page.data) };
  }
  // A response message with a set google.api.HttpBody field (e.g. a report's `csv`): that body, raw, instead of the JSON.
  const rawField = route.responseBody ? undefined : route.method.output.fields.find((f) => f.fieldKind === 'message' && f.message.typeName === HTTP_BODY_TYPE);
  const raw = rawField && ((message as Message & Record<string, unknown>)[rawField.localName] as HttpBody | undefined);
  if (raw) return { status, headers: { ...headers, 'Content-Type': raw.contentType || 'application/octet-stream' }, body: Buffer.from(raw.data) };
  let json = encodeResponse(route.method.output, message);
  if (route.responseBody) json = (json as Record<string, JsonValue>)[route.responseBody] ?? null;
  return { status, headers: { ...headers, 'Content-Type': jsonContentType }, body: Buffer.from(JSON.stringify(json)) };
}

const jsonContentType = 'application/json; charset=utf-8';
/** Every API answer, success or error, and every error of the gateway (docs/conventions.md#response-headers). */
const noStore = { 'Cache-Control': 'no-store' } as const;

/** Writes an answer (a 204 without a body or a length, RFC 9110 §8.6). */
function sendAnswer(res: http.ServerResponse, answer: Answer): void {
  if (answer.status === 204) {
    res.writeHead(204, answer.headers).end();
    return;
  }
  res.writeHead(answer.status, { ...answer.headers, 'Content-Length': answer.body.length });
  res.end(answer.body);
}

/** A built-in JSON answer (health, readiness): a probe's state of the moment, never cached. */
export function sendJson(res: http.ServerResponse, status: number, json: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(json);
  res.writeHead(status, { ...noStore, ...headers, 'Content-Type': jsonContentType, 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/**
 * A 401 of the service about the client's credentials: it carries the service's error detail. A
 * bare Unauthenticated is the service refusing the gateway's own mesh token (our fault: a 503).
 */
function refusedCredentials(err: ConnectError): boolean {
  return err.code === Code.Unauthenticated && err.findDetails(ErrorDetailSchema).length > 0;
}

function sendError(res: http.ServerResponse, err: unknown, requestId: string, log: Logger): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendAnswer(res, errorAnswer(err, requestId, log));
}

/** The answer of a refusal or a failure, with the error body of docs/conventions.md#errors. */
function errorAnswer(thrown: unknown, requestId: string, log: Logger): Answer {
  const err = thrown instanceof InputError ? catalogued(errorCatalogue.invalidRequest, { problem: thrown.message }, { field: thrown.field }) : thrown;
  let status: number;
  let body: ErrorBody;
  let headers: Record<string, string> = {};
  if (err instanceof ApiError) {
    status = err.status;
    body = err.body(requestId);
    headers = { ...err.options.headers };
  } else {
    let connectError = ConnectError.from(err);
    if (connectError.code === Code.Unauthenticated && !refusedCredentials(connectError)) {
      // A service refused the gateway's own mesh token (secret or clock mismatch): our fault, not
      // the client's credentials, so never a 401 that would sign users out.
      log.error({ request_id: requestId, err: connectError.rawMessage }, 'a service refused the mesh token');
      connectError = new ConnectError('mesh token refused', Code.Unavailable);
    }
    ({ status, body } = toHttpError(connectError, requestId));
    if (connectError.code === Code.Unavailable || connectError.code === Code.DeadlineExceeded || status >= 500) {
      log.warn({ request_id: requestId, code: Code[connectError.code], err: connectError.rawMessage }, 'service call failed');
    }
    const retryAfter = connectError.metadata.get('retry-after');
    if (retryAfter) headers['Retry-After'] = retryAfter;
  }
  // A dependency that is away (a restart, an outage) comes back within seconds: say when to retry.
  if (status === 503) headers['Retry-After'] ??= '1';
  // RFC 9110 §11.6.1: every 401 names its scheme, also the sign-in calls' (docs/conventions.md).
  if (status === 401 && !headers['WWW-Authenticate']) headers['WWW-Authenticate'] = 'Bearer';
  // docs/conventions.md#errors: no cache keeps an error (a stale 401 or 404 would outlive its cause).
  return { status, headers: { ...headers, ...noStore, 'Content-Type': jsonContentType }, body: Buffer.from(JSON.stringify(body)) };
}
