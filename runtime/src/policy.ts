import { type DescMethod, getOption, hasOption } from '@bufbuild/protobuf';
import { Code, ConnectError, type ContextValues, createContextKey } from '@connectrpc/connect';
import { http } from '@switchboard/contracts/google/api/annotations_pb';
import { type Action, isRole, type Permission, permissions, type Role } from '@switchboard/contracts/permissions';
import { AccessKind, type AccessRule, access, KeyScope, KeyScopeSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { type AuditTrail, audit } from './audit.js';
import { callerOf, clientIpOf, requestIdOf } from './call-context.js';
import { errorCatalogue } from './error-catalogue.js';
import { apiError } from './errors.js';
import type { Logger } from './log.js';
import { principalCaller } from './mesh-token.js';
import { enumToWire } from './wire-enum.js';

/**
 * The permission mechanism, in one place, for every service:
 * - `permissions`: action → roles allowed (plus roles allowed on objects the caller owns), the
 *   table of docs/api/identity.md, which the contracts package holds (contracts/src/permissions.ts);
 * - the mechanism that applies each RPC's rule, which the contract states as the method option
 *   `switchboard.api.v1.access` next to its REST route: the RPC server reads the rules of the
 *   RPCs it registers (`readRpcRules`, refusing to start when one has none or names an unknown
 *   action) and applies the rule of each call before its handler (`guardRpc`); rules of kind
 *   `handler` are decided by the handler calling `authorize` (it must: a handler that answers
 *   without a decision is a 500, logged);
 * - `mayGrant` / `mayManageMember`: the finer member rules (roles at or below one's own).
 * Nothing else in the code base compares roles.
 *
 * - `requiredScope`: the scope an API key needs for an RPC (docs/api/keys.md#scopes), checked by
 *   the gateway before it forwards and again here (`guardRpc`) on the mesh token's `scope` claim.
 *
 * Order of checks (docs/conventions.md#order-of-checks): credentials (401, the gateway) → an API
 * key's scope (403, the gateway and here) → visibility of the workspace or object (404, the
 * service: another tenant's objects are never named) → role (403, here) → input (400/422, the
 * service).
 */

export { type Action, isRole, type Permission, permissions, type Role, roles } from '@switchboard/contracts/permissions';

/** owner > admin > developer. */
const rank: Record<Role, number> = { owner: 3, admin: 2, developer: 1 };

/** Whether `role` may perform `action`; `own` says the caller owns the object. Pure. */
export function allows(role: string | undefined, action: Action, own = false): boolean {
  if (!role || !isRole(role)) return false;
  const rule: Permission = permissions[action];
  return rule.roles.includes(role) || (own && (rule.ownRoles?.includes(role) ?? false));
}

/** Whether a granter with role `granter` may give `granted` (docs/conventions.md#roles: at or below their own; owner only by transfer). */
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
let policyAudit: AuditTrail | undefined;

/** Where refusals are recorded in the audit log (docs/api/audit.md, `access.denied`); runService sets the service's own. */
export function setPolicyAuditTrail(trail: AuditTrail | undefined): void {
  policyAudit = trail;
}

/** The logger decisions go to (debug level); runService sets the service's own. */
export function setPolicyLogger(log: Logger): void {
  policyLog = log;
}

export interface AuthorizeOptions {
  /**
   * The caller's role for this decision. Defaults to the role of the mesh token (the workspace
   * the gateway resolved); a handler passes the role in the organization of the path.
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
  if (!allowed) refused(ctx, action, { workspace_id: options.workspaceId ?? claims.workspaceId, role: role ?? 'none' });
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
    const rule: Permission = permissions[action];
    const who = role ? `The ${role} role` : 'A caller without a role in this workspace';
    const allowedRoles = rule.ownRoles ? `${rule.roles.join(' or ')} (or the ${rule.ownRoles.join(', ')} who owns it)` : rule.roles.join(' or ');
    const refusal = errorCatalogue.forbidden;
    throw apiError(Code.PermissionDenied, refusal.code, refusal.message({ who, does: rule.describes, roles: allowedRoles }));
  }
  // The input comes after visibility and role (docs/conventions.md#order-of-checks): a handler
  // rule's input rules are checked at its first allowed decision.
  const inputCheck = decision?.inputCheck;
  if (inputCheck && decision) {
    decision.inputCheck = undefined;
    inputCheck();
  }
  return role as Role;
}

/**
 * The audit line of a refused authorization (ASVS 16.3): who, from where, what and why; and,
 * for a principal refused in a workspace, an `access.denied` record of the audit log.
 */
function refused(ctx: { values: ContextValues }, reason: string, details: Record<string, string | undefined>): void {
  const claims = callerOf(ctx);
  const workspaceId = details.workspace_id ?? claims.workspaceId;
  if (policyAudit && workspaceId && claims.principalId && reason !== 'caller_not_allowed') {
    const keyActor = claims.principalType === 'key' && claims.keyId;
    void policyAudit.recordAlone({
      action: 'access.denied',
      outcome: 'denied',
      actor: keyActor ? { type: 'api_key', id: claims.keyId ?? '', ip: clientIpOf(ctx) } : { type: 'user', id: claims.principalId, ip: clientIpOf(ctx) },
      target: details.rpc ? { type: 'rpc', id: details.rpc } : undefined,
      workspaceId,
      requestId: requestIdOf(ctx),
      subjectUserId: claims.principalId,
      metadata: { reason, ...details, workspace_id: undefined },
    });
    return;
  }
  if (!policyLog) return;
  audit(policyLog, {
    event: 'authorization',
    outcome: 'denied',
    userId: claims.principalId,
    ip: clientIpOf(ctx),
    requestId: requestIdOf(ctx),
    reason,
    details: { key_id: claims.keyId, ...details },
  });
}

/** A 403 for rules finer than a table row (e.g. an admin acting on the owner), same shape as authorize's. */
export function forbidden(message: string): ReturnType<typeof apiError> {
  return apiError(Code.PermissionDenied, errorCatalogue.forbidden.code, message);
}

/** How an RPC is authorized: its `switchboard.api.v1.access` method option, checked. */
export type RpcRule = (
  | /** Callable without a principal (sign-up, sign-in, JWKS, payment pages whose token is the capability). */
  { kind: 'public' }
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
  | { kind: 'internal'; callers: readonly string[] }
) & {
  /** Only a user's session (not an API key) may call it. */
  userSession: boolean;
};

/** `<package>.<Service>/<Method>`, the name rules and logs use. */
export const rpcName = (method: DescMethod) => `${method.parent.typeName}/${method.name}`;

const isAction = (name: string): name is Action => Object.hasOwn(permissions, name);

/**
 * The rule an AccessRule option states, or the reasons it is not a valid one (an unknown action,
 * a workspace rule with two actions, an internal rule without callers, …).
 */
export function parseAccessRule(option: AccessRule | undefined): RpcRule | string[] {
  if (!option || option.kind === AccessKind.UNSPECIFIED) return ['no authorization rule: add option (switchboard.api.v1.access) to the method'];
  const problems: string[] = [];
  const unknown = option.actions.filter((action) => !isAction(action));
  if (unknown.length > 0)
    problems.push(`unknown actions ${unknown.join(', ')} (the permission table of contracts/src/permissions.ts has ${Object.keys(permissions).join(', ')})`);
  const actions = option.actions.filter(isAction);
  const expect = (condition: boolean, problem: string) => {
    if (!condition) problems.push(problem);
  };
  const userSession = option.userSession;
  // Only a principal's call can be an API key's: a scope elsewhere would mean nothing.
  if (option.scope !== KeyScope.UNSPECIFIED && (option.kind === AccessKind.PUBLIC || option.kind === AccessKind.INTERNAL || userSession))
    problems.push('a scope is for rules an API key may pass (not public, internal or user-session rules)');
  if (option.alsoScopes.length > 0 && (option.scope === KeyScope.UNSPECIFIED || option.alsoScopes.includes(KeyScope.UNSPECIFIED)))
    problems.push('also_scopes name scopes beside a stated scope');
  let rule: RpcRule | undefined;
  switch (option.kind) {
    case AccessKind.PUBLIC:
    case AccessKind.ACCOUNT:
      expect(option.actions.length === 0 && option.callers.length === 0, 'public and account rules name no actions or callers');
      if (option.kind === AccessKind.PUBLIC) expect(!userSession, 'a public rule cannot need a user session');
      rule = { kind: option.kind === AccessKind.PUBLIC ? 'public' : 'account', userSession };
      break;
    case AccessKind.WORKSPACE:
      expect(option.actions.length === 1 && option.callers.length === 0, 'a workspace rule names exactly one action and no callers');
      rule = { kind: 'workspace', action: actions[0], userSession };
      break;
    case AccessKind.HANDLER:
      expect(option.actions.length > 0 && option.callers.length === 0, 'a handler rule names the actions its handler decides, and no callers');
      rule = { kind: 'handler', actions, userSession };
      break;
    case AccessKind.INTERNAL:
      expect(option.callers.length > 0 && option.actions.length === 0, 'an internal rule names its callers, and no actions');
      expect(!userSession, 'an internal rule cannot need a user session');
      rule = { kind: 'internal', callers: option.callers, userSession };
      break;
    default:
      problems.push(`unknown access kind ${option.kind}`);
  }
  return problems.length > 0 || !rule ? problems : rule;
}

/** The rule of one method, or an error naming the RPC and what is wrong with its option. */
export function ruleOf(method: DescMethod): RpcRule {
  const parsed = parseAccessRule(hasOption(method, access) ? getOption(method, access) : undefined);
  if (Array.isArray(parsed)) throw new Error(`${rpcName(method)}: ${parsed.join('; ')}`);
  return parsed;
}

/**
 * The rules of the RPCs a server registers, read from their proto options at start-up. Throws
 * when any has no valid rule, naming them all: no RPC goes unauthorized.
 */
export function readRpcRules(methods: DescMethod[]): Map<string, RpcRule> {
  const rules = new Map<string, RpcRule>();
  const problems: string[] = [];
  for (const method of methods) {
    try {
      rules.set(rpcName(method), ruleOf(method));
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  if (problems.length > 0) throw new Error(`invalid authorization rules in the protos:\n  ${problems.join('\n  ')}`);
  return rules;
}

/** An API key's scopes (docs/api/keys.md#scopes), as the wire writes them (runtime/src/wire-enum.ts). */
export const keyScopes = ['inference', 'read', 'manage'] as const;
export type KeyScopeName = (typeof keyScopes)[number];

export const isKeyScope = (name: string): name is KeyScopeName => (keyScopes as readonly string[]).includes(name);

/** Read once per method: services check it on every call of an API key. */
const scopesOfMethods = new WeakMap<DescMethod, KeyScopeName>();
const acceptedOfMethods = new WeakMap<DescMethod, readonly KeyScopeName[]>();

/**
 * The scope an API key needs to call `method` (docs/api/keys.md#scopes): the `scope` of its access
 * rule where the proto states one (the `inference` routes), else `read` for a GET route and
 * `manage` for any other, a method without a REST route included (the strictest: only the gateway
 * speaks for a key, and only on routes). A user's session needs no scope.
 */
export function requiredScope(method: DescMethod): KeyScopeName {
  let scope = scopesOfMethods.get(method);
  if (!scope) {
    const stated = hasOption(method, access) ? getOption(method, access).scope : KeyScope.UNSPECIFIED;
    if (stated !== KeyScope.UNSPECIFIED) scope = enumToWire(KeyScopeSchema, stated) as KeyScopeName;
    else scope = hasOption(method, http) && getOption(method, http).pattern.case === 'get' ? 'read' : 'manage';
    scopesOfMethods.set(method, scope);
  }
  return scope;
}

/**
 * The scopes any one of which admits an API key to `method`: `requiredScope` first, then the
 * rule's `also_scopes` (the generation routes: `inference` or `read`).
 */
export function acceptedScopes(method: DescMethod): readonly KeyScopeName[] {
  let accepted = acceptedOfMethods.get(method);
  if (!accepted) {
    const also = hasOption(method, access) ? getOption(method, access).alsoScopes : [];
    accepted = [requiredScope(method), ...also.map((scope) => enumToWire(KeyScopeSchema, scope) as KeyScopeName)];
    acceptedOfMethods.set(method, accepted);
  }
  return accepted;
}

/** Whether `scopes` (an API key's) admit it to `method`; none (a token without the claim) admit nothing. */
export function scopesAdmit(method: DescMethod, scopes: readonly string[] | undefined): boolean {
  return acceptedScopes(method).some((scope) => scopes?.includes(scope));
}

/** The 403 of an API key whose scopes lack `required` (docs/api/keys.md#scopes), naming it in metadata. */
export function insufficientScope(required: KeyScopeName): ConnectError {
  const refusal = errorCatalogue.insufficientScope;
  return apiError(Code.PermissionDenied, refusal.code, refusal.message, { metadata: { required_scope: required } });
}

/** The credentials a REST route of an RPC accepts at the gateway, from its rule. */
export type Credentials = 'none' | 'user_session' | 'user_session_or_api_key';

export function credentialsOf(rule: RpcRule): Credentials {
  if (rule.kind === 'public') return 'none';
  return rule.userSession ? 'user_session' : 'user_session_or_api_key';
}

/** The 403 of a rule that needs a user's session, called with an API key (docs/api/identity.md#principals). */
const { userSessionRequired } = errorCatalogue;

/**
 * Whether the handler of a `handler` rule called `authorize` during this call, and the check of
 * the call's input rules still to run once it allows (runtime/src/input-rules.ts).
 */
const decisionKey = createContextKey<{ decided: boolean; inputCheck?: () => void } | undefined>(undefined, { description: 'authorization decision' });

/**
 * Runs `check` when the handler's first authorization allows the call; false when the call has no
 * handler rule (no decision comes).
 */
export function checkAfterDecision(values: ContextValues, check: () => void): boolean {
  const decision = values.get(decisionKey);
  if (!decision) return false;
  decision.inputCheck = check;
  return true;
}

/**
 * Applies the rule of the called RPC (inside the RPC server's interceptor, after the mesh token
 * is verified): 401 without the principal a rule needs, 403 for a caller, credential or role it
 * refuses. `rule` is undefined only for an RPC the server did not register (a 500, never a pass).
 */
export async function guardRpc<T>(rule: RpcRule | undefined, method: DescMethod, values: ContextValues, next: () => Promise<T>): Promise<T> {
  const name = rpcName(method);
  const ctx = { values };
  const claims = callerOf(ctx);
  const needsPrincipal = () => {
    if (!claims.principalId) throw apiError(Code.Unauthenticated, 'unauthenticated', 'This call needs a signed-in user or an API key.');
    if (rule?.userSession && claims.principalType !== 'user') {
      refused(ctx, userSessionRequired.code, { rpc: name, principal_type: claims.principalType });
      throw apiError(Code.PermissionDenied, userSessionRequired.code, userSessionRequired.message);
    }
    // The gateway checked it already; checked again here so that no service trusts that alone. A
    // key's token without the claim has no scope (fail closed).
    if (claims.principalType === 'key') {
      const required = requiredScope(method);
      if (!scopesAdmit(method, claims.scopes)) {
        refused(ctx, errorCatalogue.insufficientScope.code, { rpc: name, required_scope: required, scopes: claims.scopes?.join(' ') });
        throw insufficientScope(required);
      }
    }
  };
  // Every rule but an internal one serves the REST surface: only the front door calls it, for a
  // principal or (public rules) for an anonymous client; a data plane or a service never does
  // (docs/api/internal-calls.md#mesh-keys).
  const callerNotAllowed = () => {
    refused(ctx, 'caller_not_allowed', { rpc: name, caller: claims.caller });
    return apiError(Code.PermissionDenied, errorCatalogue.forbidden.code, `${method.name} is not available to ${claims.caller}.`);
  };
  if (rule && rule.kind !== 'internal' && claims.caller !== principalCaller) throw callerNotAllowed();
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
      if (!rule.callers.includes(claims.caller)) throw callerNotAllowed();
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
