import { Code, type HandlerContext } from '@connectrpc/connect';
import { callerOf, requestIdOf } from './call-context.js';
import { apiError } from './errors.js';
import type { MeshClaims } from './mesh-token.js';

/**
 * Who a handler works for, read once from the mesh token the gateway signed
 * (docs/api/internal-calls.md): the user (or the creator of the API key acting for them), the
 * workspace the gateway resolved with the caller's role in it, and the request id. Every service
 * reads its caller here; domain modules take the `Caller` (its `ctx` is what `authorize` decides on).
 */
export interface Caller {
  ctx: HandlerContext;
  /** The signed-in user, or the creator of the API key. */
  userId: string;
  /** "user" for an access token (a session), "key" for an API key. */
  principalType?: 'user' | 'key';
  /** The workspace the gateway resolved, if the route has one. */
  workspaceId?: string;
  /** The caller's role in `workspaceId`. */
  role?: string;
  /** The user's session (access tokens only). */
  sessionId?: string;
  /** The API key of the call (API keys only). */
  keyId?: string;
  /** The API key's scopes (API keys only; docs/api/keys.md#scopes). */
  scopes?: readonly string[];
  requestId: string;
}

/** A caller acting in a workspace: keys, billing, conversations, webhooks. */
export interface WorkspaceCaller extends Caller {
  workspaceId: string;
}

const needsPrincipal = (message: string) => apiError(Code.Unauthenticated, 'unauthenticated', message);

const callerWith = (ctx: HandlerContext, claims: MeshClaims, userId: string) => ({
  ctx,
  userId,
  principalType: claims.principalType,
  workspaceId: claims.workspaceId,
  role: claims.role,
  sessionId: claims.sessionId,
  keyId: claims.keyId,
  scopes: claims.scopes,
  requestId: requestIdOf(ctx),
});

/** The signed-in user (or key creator) a call is made for; 401 when the mesh token names none. */
export function userCaller(ctx: HandlerContext): Caller {
  const claims = callerOf(ctx);
  if (!claims.principalId) throw needsPrincipal('This call needs a signed-in user.');
  return callerWith(ctx, claims, claims.principalId);
}

/**
 * The caller acting in the workspace the gateway resolved; 401 when the mesh token names no
 * principal or workspace. With `path` (a route whose path names the workspace), a path naming
 * another workspace than the token's throws `path.notFound()`: another tenant is never named.
 */
export function workspaceCaller(ctx: HandlerContext, path?: { workspaceId: string; notFound: () => Error }): WorkspaceCaller {
  const claims = callerOf(ctx);
  if (!claims.principalId || !claims.workspaceId) throw needsPrincipal('This call needs a signed-in user or an API key.');
  if (path && path.workspaceId !== claims.workspaceId) throw path.notFound();
  return { ...callerWith(ctx, claims, claims.principalId), workspaceId: claims.workspaceId };
}

/**
 * The workspace of an API key acting as its creator (it sees its own workspace only), undefined
 * for a user's session, which may see every workspace it is a member of.
 */
export function keyWorkspaceOf(caller: Caller): string | undefined {
  return caller.principalType === 'key' ? caller.workspaceId : undefined;
}
