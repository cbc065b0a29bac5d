import { Code, type HandlerContext } from '@connectrpc/connect';
import { apiError } from '@switchboard/runtime/errors';
import { callerOf, requestIdOf } from '@switchboard/runtime/server';

/** The workspace a conversations RPC acts in (the gateway resolved it; the rule checked the role). */
export function workspaceOf(ctx: HandlerContext): { workspaceId: string; requestId: string } {
  const { workspaceId } = callerOf(ctx);
  if (!workspaceId) throw apiError(Code.Unauthenticated, 'unauthenticated', 'This call needs a signed-in user or an API key.');
  return { workspaceId, requestId: requestIdOf(ctx) };
}
