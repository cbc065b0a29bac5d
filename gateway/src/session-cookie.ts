import type http from 'node:http';
import type { DescMethod, Message } from '@bufbuild/protobuf';
import { AuthService } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import type { Route } from './routes.js';

/**
 * The dashboard's session cookie (docs/api/identity.md#the-dashboards-session-cookie,
 * docs/decisions.md "Dashboard sessions in a cookie"). A client opts in per request with
 * `X-Switchboard-Session: cookie`; then the refresh token of register, login, login/2fa and
 * refresh leaves the JSON body for an HttpOnly, SameSite=Strict cookie that only the refresh path
 * receives, and a refresh without a token in its body reads the cookie. Without the header
 * nothing changes, so API clients keep the contract's body tokens.
 *
 * Cross-site request forgery has nothing to work with: the cookie is SameSite=Strict (never sent
 * on a request another site starts), it reaches only POST /v1/auth/refresh, the gateway reads it
 * only with the custom header (which a cross-site form cannot send, and a cross-site fetch only
 * after a CORS preflight the gateway never grants), and the answer (the new access token) is not
 * readable by another origin.
 */

export const sessionModeHeader = 'x-switchboard-session';
export const refreshCookieName = 'sb_refresh';
export const refreshCookiePath = '/v1/auth/refresh';
/** The session's absolute lifetime (docs/api/identity.md#sessions-and-refresh-tokens): the server decides sooner ends. */
const refreshCookieMaxAgeSeconds = 30 * 24 * 3600;

const issuingMethods = new Set<DescMethod>([
  AuthService.method.register,
  AuthService.method.login,
  AuthService.method.loginSecondFactor,
  AuthService.method.refresh,
]);

/** Whether the request asked for the cookie mode. */
export function wantsCookie(req: http.IncomingMessage): boolean {
  const value = req.headers[sessionModeHeader];
  return typeof value === 'string' && value.trim().toLowerCase() === 'cookie';
}

/** Routes whose answer may hold a session (and so a refresh token for the cookie). */
export const issuesSession = (route: Route) => issuingMethods.has(route.method);
export const isRefresh = (route: Route) => (route.method as DescMethod) === AuthService.method.refresh;
/** A logout that ends the caller's own session (`local` or `global`; `others` keeps it, and its cookie). */
export const endsOwnSession = (route: Route, input: Message) =>
  (route.method as DescMethod) === AuthService.method.logout && (input as Message & { scope?: string }).scope !== 'others';

/**
 * The refresh token of the request's cookie, if it carries exactly one. Two mean one was planted
 * beside ours (a sibling subdomain can set a `Domain=` cookie on the same path, and browsers send
 * the older first): neither is used, so nobody is signed into a session someone else chose.
 */
export function refreshTokenOfCookie(req: http.IncomingMessage): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  const values = header.split(';').flatMap((part) => {
    const eq = part.indexOf('=');
    return eq > 0 && part.slice(0, eq).trim() === refreshCookieName ? [part.slice(eq + 1).trim()] : [];
  });
  // Our tokens are base64url; anything else is not one of ours.
  return values.length === 1 && /^[A-Za-z0-9_-]{1,200}$/.test(values[0]) ? values[0] : undefined;
}

/**
 * `Secure` always, but on plain http to a loopback name: browsers keep no Secure cookie from an
 * http page, and http://localhost or 127.0.0.1 is the development start (its traffic never leaves
 * the machine).
 */
function attributes(req: http.IncomingMessage, overTls: boolean): string {
  const secure = overTls || !isLoopbackHost(req.headers.host) ? '; Secure' : '';
  return `; Path=${refreshCookiePath}; HttpOnly; SameSite=Strict${secure}`;
}

function isLoopbackHost(host: string | undefined): boolean {
  if (!host) return false;
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:\d+$/, '');
  return name === 'localhost' || name.endsWith('.localhost') || name === '[::1]' || /^127(\.\d{1,3}){3}$/.test(name);
}

/** Moves the refresh token of a session answer (not a 2FA challenge) out of the body into the cookie. */
export function moveRefreshTokenToCookie(req: http.IncomingMessage, res: http.ServerResponse, message: Message, overTls: boolean): void {
  const session = (message as Message & { session?: { refreshToken: string } }).session;
  if (!session?.refreshToken) return;
  res.appendHeader('Set-Cookie', `${refreshCookieName}=${session.refreshToken}; Max-Age=${refreshCookieMaxAgeSeconds}${attributes(req, overTls)}`);
  // Unset, the field is left out of the JSON (omit_if_unset): the page's script never sees the token.
  session.refreshToken = '';
}

/** Ends the cookie (logout, or a refresh token that no longer works). */
export function clearRefreshCookie(req: http.IncomingMessage, res: http.ServerResponse, overTls: boolean): void {
  res.appendHeader('Set-Cookie', `${refreshCookieName}=; Max-Age=0${attributes(req, overTls)}`);
}
