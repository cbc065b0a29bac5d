import { Code, ConnectError, createContextKey, type HandlerContext } from '@connectrpc/connect';
import type { MeshClaims } from './mesh-token.js';

/** What the RPC server knows about the current call: the verified mesh claims and the request id. */

export const callerKey = createContextKey<MeshClaims | undefined>(undefined, { description: 'mesh caller' });
export const requestIdKey = createContextKey<string>('', { description: 'request id' });

/** The verified mesh-token claims of the current call (always set past the interceptor). */
export function callerOf(ctx: Pick<HandlerContext, 'values'>): MeshClaims {
  const claims = ctx.values.get(callerKey);
  if (!claims) throw new ConnectError('no mesh token', Code.Unauthenticated);
  return claims;
}

export function requestIdOf(ctx: Pick<HandlerContext, 'values'>): string {
  return ctx.values.get(requestIdKey);
}

/** The client address the gateway saw for this call, if a gateway made it for a client. */
export function clientIpOf(ctx: Pick<HandlerContext, 'values'>): string | undefined {
  return ctx.values.get(callerKey)?.clientIp;
}

/** The client's User-Agent the gateway saw (bounded), on calls it made to identity for a client. */
export function userAgentOf(ctx: Pick<HandlerContext, 'values'>): string | undefined {
  return ctx.values.get(callerKey)?.userAgent;
}

/**
 * What domain code needs of the call it works for: the request id and client address for its
 * audit lines, and the signal that ends with the call (its deadline, or its client leaving).
 */
export interface CallScope {
  requestId?: string;
  ip?: string;
  /** The client's User-Agent, where the gateway passed it (calls to identity). */
  userAgent?: string;
  signal?: AbortSignal;
}

export function callScopeOf(ctx: Pick<HandlerContext, 'values' | 'signal'>): CallScope {
  return { requestId: requestIdOf(ctx), ip: clientIpOf(ctx), userAgent: userAgentOf(ctx), signal: ctx.signal };
}
