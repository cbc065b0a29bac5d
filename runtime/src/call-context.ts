import { AsyncLocalStorage } from 'node:async_hooks';
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

/**
 * The request a piece of work belongs to, for code that has no handler context at hand (audit
 * lines deep in a domain module): set by the RPC server around each call.
 */
export const requestScope = new AsyncLocalStorage<{
  requestId: string;
  clientIp?: string;
  /** Aborted when the call's deadline passes or its client goes away. */
  signal?: AbortSignal;
}>();
