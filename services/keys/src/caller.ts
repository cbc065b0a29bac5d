import { Code, type HandlerContext } from '@connectrpc/connect';
import { apiError } from '@switchboard/runtime/errors';
import { callerOf } from '@switchboard/runtime/server';

/**
 * Who calls a key RPC: the user (or the creator of the API key) and the workspace the gateway
 * resolved for the request. Keys are seen only inside that workspace: another workspace's key is
 * a 404 like a key that does not exist.
 */
export interface Caller {
  ctx: HandlerContext;
  userId: string;
  workspaceId: string;
}

export function callerFrom(ctx: HandlerContext): Caller {
  const claims = callerOf(ctx);
  if (!claims.principalId || !claims.workspaceId) throw apiError(Code.Unauthenticated, 'unauthenticated', 'This call needs a signed-in user or an API key.');
  return { ctx, userId: claims.principalId, workspaceId: claims.workspaceId };
}

export const keyNotFound = () => apiError(Code.NotFound, 'key_not_found', 'No such key in this workspace.');
