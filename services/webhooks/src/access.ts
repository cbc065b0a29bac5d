import { Code, type HandlerContext } from '@connectrpc/connect';
import { type WorkspaceCaller, workspaceCaller } from '@switchboard/runtime/caller';
import { errorCatalogue } from '@switchboard/runtime/error-catalogue';
import { apiError } from '@switchboard/runtime/errors';
import { type Action, authorize } from '@switchboard/runtime/policy';

/**
 * Who may see a webhook: the caller in the workspace of the path. The gateway resolves that
 * workspace (404 for a non-member, or an API key of another workspace) and signs it with the
 * caller's role into the mesh token; a path naming another workspace than the token is refused
 * the same way, so a webhook is never visible outside its workspace.
 */

// The gateway's answer for the same organization (runtime/src/error-catalogue.ts), so the two never tell it apart.
export const workspaceNotFound = () => apiError(Code.NotFound, errorCatalogue.organizationNotFound.code, errorCatalogue.organizationNotFound.message);
export const webhookNotFound = () => apiError(Code.NotFound, 'webhook_not_found', 'No such webhook in this workspace.');

/** The caller acting in `workspaceId` of the path. */
export const callerIn = (ctx: HandlerContext, workspaceId: string): WorkspaceCaller => workspaceCaller(ctx, { workspaceId, notFound: workspaceNotFound });

/**
 * The permission table's decision (owners and admins, docs/conventions.md#roles): after the object was found
 * (404 before 403), before the input is read (403 before 400).
 */
export function allow(caller: WorkspaceCaller, action: Extract<Action, 'webhooks.read' | 'webhooks.manage'>): void {
  authorize(caller.ctx, action, { workspaceId: caller.workspaceId });
}
