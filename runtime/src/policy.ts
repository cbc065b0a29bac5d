import { Code, type HandlerContext } from '@connectrpc/connect';
import { apiError } from './errors.js';
import type { Logger } from './log.js';
import { callerOf, requestIdOf } from './server.js';

/**
 * The permission table of SPEC §3, in one place. Every RPC of every service that acts for a
 * principal calls `authorize` (or `decide`) with one of these actions; nothing else in the code
 * base compares roles.
 *
 * Order of checks (SPEC §10): credentials (401, the gateway) → visibility of the workspace or
 * object (404, the service: another tenant's objects are never named) → role (403, here) →
 * input (400/422, the service).
 */

export const roles = ['owner', 'admin', 'developer'] as const;
export type Role = (typeof roles)[number];

export function isRole(value: string): value is Role {
  return (roles as readonly string[]).includes(value);
}

/** owner > admin > developer. */
const rank: Record<Role, number> = { owner: 3, admin: 2, developer: 1 };

const everyone: readonly Role[] = roles;
const managers: readonly Role[] = ['owner', 'admin'];
const ownerOnly: readonly Role[] = ['owner'];

interface Rule {
  /** Roles allowed on any object of the workspace. */
  roles: readonly Role[];
  /** Roles also allowed when the caller owns the object (`ownerId` = the caller). */
  ownRoles?: readonly Role[];
  /** The row of the SPEC §3 table this action belongs to, for messages and docs. */
  describes: string;
}

/**
 * Action → rule. Names are `<resource>.<verb>`; the services of later issues use the rows
 * already here (keys, billing, conversations, feedback, webhooks).
 */
export const permissions = {
  // organizations (identity)
  'organization.read': { roles: everyone, describes: 'read the organization' },
  'organization.delete': { roles: ownerOnly, describes: 'delete the organization' },
  'organization.transfer_ownership': { roles: ownerOnly, describes: 'transfer ownership' },
  'members.read': { roles: everyone, describes: 'list the members' },
  'members.invite': { roles: managers, describes: 'invite members' },
  'members.update_role': { roles: managers, describes: 'change roles below owner' },
  'members.remove': { roles: managers, describes: 'remove members' },
  'invitations.read': { roles: managers, describes: 'list invitations' },
  'invitations.revoke': { roles: managers, describes: 'revoke invitations' },
  // conversations, messages, feedback (conversations)
  'conversations.read': { roles: everyone, describes: 'read conversations and messages' },
  'conversations.write': { roles: everyone, describes: 'write conversations and messages' },
  'feedback.read': { roles: everyone, describes: 'read feedback' },
  'feedback.write': { roles: everyone, describes: 'give feedback' },
  // keys
  'keys.read': { roles: everyone, describes: 'read keys' },
  'keys.create': { roles: everyone, describes: 'create keys' },
  /** Change (name, cap, alert webhook, routing policy) or revoke a key: any key, or one's own. */
  'keys.manage': { roles: managers, ownRoles: everyone, describes: 'change or revoke any key of the workspace' },
  // billing
  'billing.read': { roles: everyone, describes: 'read billing (balance, usage, plan, hint, top-ups)' },
  'billing.topup': { roles: managers, describes: 'top up or check out' },
  // webhooks
  'webhooks.read': { roles: managers, describes: 'read webhooks and deliveries' },
  'webhooks.manage': { roles: managers, describes: 'manage webhooks' },
} as const satisfies Record<string, Rule>;

export type Action = keyof typeof permissions;

/** Whether `role` may perform `action`; `own` says the caller owns the object. Pure. */
export function allows(role: string | undefined, action: Action, own = false): boolean {
  if (!role || !isRole(role)) return false;
  const rule: Rule = permissions[action];
  return rule.roles.includes(role) || (own && (rule.ownRoles?.includes(role) ?? false));
}

/** Whether a granter with role `granter` may give `granted` (SPEC §3: at or below their own; owner only by transfer). */
export function mayGrant(granter: Role, granted: Role): boolean {
  return granted !== 'owner' && rank[granted] <= rank[granter];
}

/**
 * Whether `actor` may change or remove a member whose role is `target`: never the owner (that is
 * a transfer), and only members at or below the actor's own role.
 */
export function mayManageMember(actor: Role, target: Role): boolean {
  return target !== 'owner' && rank[target] <= rank[actor];
}

let policyLog: Logger | undefined;

/** The logger decisions go to (debug level); runService sets the service's own. */
export function setPolicyLogger(log: Logger): void {
  policyLog = log;
}

export interface AuthorizeOptions {
  /**
   * The caller's role for this decision. Defaults to the role of the mesh token (the workspace
   * the gateway resolved); identity passes the role in the organization of the path.
   */
  role?: string;
  /** The user who owns the object (a key's creator): the action's `ownRoles` apply to them. */
  ownerId?: string;
  /** The workspace of the decision, for the log line (defaults to the mesh token's). */
  workspaceId?: string;
}

/**
 * Decides `action` for the caller of `ctx`; throws 403 `forbidden` (with a message naming the
 * role and the action) when the permission table refuses it. Visibility (404) must be checked
 * before. The decision is logged at debug level.
 */
export function authorize(ctx: HandlerContext, action: Action, options: AuthorizeOptions = {}): Role {
  const claims = callerOf(ctx);
  const role = options.role ?? claims.role;
  const own = options.ownerId !== undefined && claims.principalId !== undefined && options.ownerId === claims.principalId;
  const allowed = allows(role, action, own);
  policyLog?.debug(
    {
      request_id: requestIdOf(ctx),
      action,
      principal_id: claims.principalId,
      principal_type: claims.principalType,
      workspace_id: options.workspaceId ?? claims.workspaceId,
      role: role ?? null,
      own,
      decision: allowed ? 'allow' : 'deny',
    },
    'authorization decision',
  );
  if (!allowed) {
    const rule: Rule = permissions[action];
    const who = role ? `The ${role} role` : 'A caller without a role in this workspace';
    const allowedRoles = rule.ownRoles ? `${rule.roles.join(' or ')} (or the ${rule.ownRoles.join(', ')} who owns it)` : rule.roles.join(' or ');
    throw apiError(Code.PermissionDenied, 'forbidden', `${who} cannot ${rule.describes}; this needs the ${allowedRoles} role.`);
  }
  return role as Role;
}

/** A 403 for rules finer than a table row (e.g. an admin acting on the owner), same shape as authorize's. */
export function forbidden(message: string): ReturnType<typeof apiError> {
  return apiError(Code.PermissionDenied, 'forbidden', message);
}
