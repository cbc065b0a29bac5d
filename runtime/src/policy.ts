import type { DescMethod } from '@bufbuild/protobuf';
import { Code, ConnectError, type ContextValues, createContextKey } from '@connectrpc/connect';
import { callerOf, requestIdOf } from './call-context.js';
import { apiError } from './errors.js';
import type { Logger } from './log.js';

/**
 * The permission table of SPEC §3, in one place, for every service:
 * - `permissions`: action → roles allowed (plus roles allowed on objects the caller owns);
 * - `rpcRules`: every RPC of the mesh → how it is authorized. The RPC server applies the rule of
 *   each call before its handler (`guardRpc`) and refuses to start when one of its RPCs has no
 *   rule (`assertRpcRules`); rules of kind `handler` are decided by the handler calling
 *   `authorize` (it must: a handler that answers without a decision is a 500, logged);
 * - `mayGrant` / `mayManageMember`: the finer member rules (roles at or below one's own).
 * Nothing else in the code base compares roles.
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
  /** Removing oneself; the owner is refused by a business rule (409: transfer first). */
  'members.leave': { roles: everyone, describes: 'leave the organization' },
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
export function authorize(ctx: { values: ContextValues }, action: Action, options: AuthorizeOptions = {}): Role {
  const claims = callerOf(ctx);
  const decision = ctx.values.get(decisionKey);
  if (decision) decision.decided = true;
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

/** How an RPC is authorized. */
export type RpcRule =
  /** Callable without a principal (sign-up, sign-in, JWKS, payment pages whose token is the capability). */
  | { kind: 'public' }
  /** The signed-in principal's own account or memberships: a principal is required, no workspace role. */
  | { kind: 'account' }
  /** Acts in the workspace the gateway resolved: `action` is decided on the mesh token's role before the handler. */
  | { kind: 'workspace'; action: Action }
  /**
   * The handler decides, because visibility (404) comes before the role (403) and needs the
   * object: the organization or workspace of the path, a key's creator. It must call `authorize`
   * with one of `actions`.
   */
  | { kind: 'handler'; actions: readonly Action[] }
  /** Internal (no REST route): only these calling components (the mesh token's `sub`). */
  | { kind: 'internal'; callers: readonly string[] };

const publicRpc: RpcRule = { kind: 'public' };
const account: RpcRule = { kind: 'account' };
const workspace = (action: Action): RpcRule => ({ kind: 'workspace', action });
const handler = (...actions: Action[]): RpcRule => ({ kind: 'handler', actions });
const internal = (...callers: string[]): RpcRule => ({ kind: 'internal', callers });

/** Every RPC of the mesh (`<package>.<Service>/<Method>`) and its rule. */
export const rpcRules: Record<string, RpcRule> = {
  // identity: accounts and sessions (not workspace-scoped)
  'switchboard.identity.v1.AuthService/Register': publicRpc,
  'switchboard.identity.v1.AuthService/Login': publicRpc,
  'switchboard.identity.v1.AuthService/LoginSecondFactor': publicRpc,
  'switchboard.identity.v1.AuthService/Refresh': publicRpc,
  'switchboard.identity.v1.AuthService/Logout': account,
  'switchboard.identity.v1.AuthService/RequestPasswordReset': publicRpc,
  'switchboard.identity.v1.AuthService/ConfirmPasswordReset': publicRpc,
  'switchboard.identity.v1.AuthService/VerifyEmail': publicRpc,
  'switchboard.identity.v1.AuthService/GetJwks': publicRpc,
  'switchboard.identity.v1.AuthService/ListRevokedSessions': internal('gateway'),
  'switchboard.identity.v1.AccountService/GetAccount': account,
  'switchboard.identity.v1.AccountService/UpdateAccount': account,
  'switchboard.identity.v1.AccountService/ChangePassword': account,
  'switchboard.identity.v1.AccountService/GetTwoFactorStatus': account,
  'switchboard.identity.v1.AccountService/EnrollTwoFactor': account,
  'switchboard.identity.v1.AccountService/ActivateTwoFactor': account,
  'switchboard.identity.v1.AccountService/DisableTwoFactor': account,
  'switchboard.identity.v1.AccountService/RegenerateRecoveryCodes': account,
  'switchboard.identity.v1.AccountService/DeactivateAccount': account,
  // identity: organizations (the organization of the path counts: the handler checks membership)
  'switchboard.identity.v1.OrganizationService/CreateOrganization': account,
  'switchboard.identity.v1.OrganizationService/ListOrganizations': account,
  'switchboard.identity.v1.OrganizationService/AcceptInvitation': account,
  'switchboard.identity.v1.OrganizationService/GetOrganization': handler('organization.read'),
  'switchboard.identity.v1.OrganizationService/DeleteOrganization': handler('organization.delete'),
  'switchboard.identity.v1.OrganizationService/CreateInvitation': handler('members.invite'),
  'switchboard.identity.v1.OrganizationService/ListInvitations': handler('invitations.read'),
  'switchboard.identity.v1.OrganizationService/RevokeInvitation': handler('invitations.revoke'),
  'switchboard.identity.v1.OrganizationService/ListMembers': handler('members.read'),
  'switchboard.identity.v1.OrganizationService/UpdateMember': handler('members.update_role'),
  // Removing oneself (leaving) needs no manager role: the handler decides which case it is.
  'switchboard.identity.v1.OrganizationService/RemoveMember': handler('members.remove', 'members.leave'),
  'switchboard.identity.v1.OrganizationService/TransferOwnership': handler('organization.transfer_ownership'),
  'switchboard.identity.v1.OrganizationService/ResolveWorkspace': internal('gateway'),
  // keys
  'switchboard.keys.v1.KeyService/CreateKey': workspace('keys.create'),
  'switchboard.keys.v1.KeyService/ListKeys': workspace('keys.read'),
  'switchboard.keys.v1.KeyService/GetKey': workspace('keys.read'),
  'switchboard.keys.v1.KeyService/UpdateKey': handler('keys.manage'),
  'switchboard.keys.v1.KeyService/UpdateSpendCap': handler('keys.manage'),
  'switchboard.keys.v1.KeyService/SetAlertWebhook': handler('keys.manage'),
  'switchboard.keys.v1.KeyService/DeleteAlertWebhook': handler('keys.manage'),
  'switchboard.keys.v1.KeyService/SetRoutingPolicy': handler('keys.manage'),
  'switchboard.keys.v1.KeyService/RevokeKey': handler('keys.manage'),
  'switchboard.keys.v1.KeyService/AuthorizeKey': internal('data-plane'),
  'switchboard.keys.v1.KeyService/AuthenticateKey': internal('gateway'),
  'switchboard.keys.v1.KeyService/ResolveAlertWebhook': internal('webhooks'),
  // billing
  'switchboard.billing.v1.BillingService/GetBalance': workspace('billing.read'),
  'switchboard.billing.v1.BillingService/GetUsage': workspace('billing.read'),
  'switchboard.billing.v1.BillingService/GetUsageByTier': workspace('billing.read'),
  'switchboard.billing.v1.BillingService/GetPlan': workspace('billing.read'),
  'switchboard.billing.v1.BillingService/GetUpgradeHint': workspace('billing.read'),
  'switchboard.billing.v1.BillingService/ListTopups': workspace('billing.read'),
  'switchboard.billing.v1.BillingService/CreateCheckout': workspace('billing.topup'),
  'switchboard.billing.v1.BillingService/CreateTopup': workspace('billing.topup'),
  'switchboard.billing.v1.CheckoutService/GetSandboxCheckout': publicRpc,
  'switchboard.billing.v1.CheckoutService/CompleteSandboxCheckout': publicRpc,
  'switchboard.billing.v1.CheckoutService/HandleStripeWebhook': publicRpc,
  'switchboard.billing.v1.UsageService/RecordUsage': internal('data-plane'),
  'switchboard.billing.v1.UsageService/GetGeneration': internal('conversations'),
  // conversations and feedback
  'switchboard.conversations.v1.ConversationService/CreateConversation': workspace('conversations.write'),
  'switchboard.conversations.v1.ConversationService/ListConversations': workspace('conversations.read'),
  'switchboard.conversations.v1.ConversationService/GetConversation': workspace('conversations.read'),
  'switchboard.conversations.v1.ConversationService/UpdateConversation': workspace('conversations.write'),
  'switchboard.conversations.v1.ConversationService/DeleteConversation': workspace('conversations.write'),
  'switchboard.conversations.v1.ConversationService/CreateMessage': workspace('conversations.write'),
  'switchboard.conversations.v1.ConversationService/ListMessages': workspace('conversations.read'),
  'switchboard.conversations.v1.FeedbackService/RecordFeedback': workspace('feedback.write'),
  'switchboard.conversations.v1.FeedbackService/GetFeedbackSummary': workspace('feedback.read'),
  'switchboard.conversations.v1.RoutingService/RouteModel': internal('data-plane'),
  // webhooks: {workspace_id} of the path is the workspace (404 when the caller is not a member)
  'switchboard.webhooks.v1.WebhookService/CreateWebhook': handler('webhooks.manage'),
  'switchboard.webhooks.v1.WebhookService/ListWebhooks': handler('webhooks.read'),
  'switchboard.webhooks.v1.WebhookService/GetWebhook': handler('webhooks.read'),
  'switchboard.webhooks.v1.WebhookService/UpdateWebhook': handler('webhooks.manage'),
  'switchboard.webhooks.v1.WebhookService/DeleteWebhook': handler('webhooks.manage'),
  'switchboard.webhooks.v1.WebhookService/RotateWebhookSecret': handler('webhooks.manage'),
  'switchboard.webhooks.v1.WebhookService/TestWebhook': handler('webhooks.manage'),
  'switchboard.webhooks.v1.WebhookService/ListDeliveries': handler('webhooks.read'),
  'switchboard.webhooks.v1.WebhookService/GetDelivery': handler('webhooks.read'),
  'switchboard.webhooks.v1.WebhookService/RedeliverDelivery': handler('webhooks.manage'),
  'switchboard.webhooks.v1.WebhookService/RecoverDeliveries': handler('webhooks.manage'),
  'switchboard.webhooks.v1.EventService/PublishEvent': internal('data-plane'),
};

const rpcName = (method: DescMethod) => `${method.parent.typeName}/${method.name}`;

/** Throws (at start-up) when an RPC the server registers has no rule: no RPC goes unauthorized. */
export function assertRpcRules(methods: DescMethod[]): void {
  const missing = methods.map(rpcName).filter((name) => !(name in rpcRules));
  if (missing.length > 0) {
    throw new Error(`no authorization rule for ${missing.join(', ')}: add them to rpcRules in runtime/src/policy.ts`);
  }
}

/** Whether the handler of a `handler` rule called `authorize` during this call. */
const decisionKey = createContextKey<{ decided: boolean } | undefined>(undefined, { description: 'authorization decision' });

/**
 * Applies the rule of the called RPC (inside the RPC server's interceptor, after the mesh token
 * is verified): 401 without the principal a rule needs, 403 for a caller or role it refuses.
 */
export async function guardRpc<T>(method: DescMethod, values: ContextValues, next: () => Promise<T>): Promise<T> {
  const name = rpcName(method);
  const rule = rpcRules[name];
  const ctx = { values };
  const claims = callerOf(ctx);
  const needsPrincipal = () => {
    if (!claims.principalId) throw apiError(Code.Unauthenticated, 'unauthenticated', 'This call needs a signed-in user or an API key.');
  };
  switch (rule?.kind) {
    case 'public':
      return next();
    case 'account':
      needsPrincipal();
      return next();
    case 'workspace':
      needsPrincipal();
      authorize(ctx, rule.action);
      return next();
    case 'internal':
      if (!rule.callers.includes(claims.caller)) {
        policyLog?.debug({ request_id: requestIdOf(ctx), rpc: name, caller: claims.caller, decision: 'deny' }, 'authorization decision');
        throw apiError(Code.PermissionDenied, 'forbidden', `${method.name} is not available to ${claims.caller}.`);
      }
      return next();
    case 'handler': {
      needsPrincipal();
      const decision = { decided: false };
      values.set(decisionKey, decision);
      const response = await next();
      if (!decision.decided) {
        policyLog?.error({ request_id: requestIdOf(ctx), rpc: name }, 'the handler answered without an authorization decision');
        throw new ConnectError(`${name} answered without an authorization decision`, Code.Internal);
      }
      return response;
    }
    default:
      throw new ConnectError(`no authorization rule for ${name}`, Code.Internal);
  }
}
