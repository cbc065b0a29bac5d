import { type Action, type Credentials, type Permission, permissions, type RpcRule, roles } from '@switchboard/runtime/policy';
import type { Route } from '../routes.js';
import type { Json } from './json-schema.js';

/**
 * Who may call an operation: its credentials (security, in words), its access rule from the
 * proto (a line of the description and `x-switchboard-access`), and the role table.
 */

export function credentialsLabel(credentials: Credentials): string {
  switch (credentials) {
    case 'none':
      return 'No credentials.';
    case 'user_session':
      return 'A user access token (an API key gets 403 `user_session_required`).';
    default:
      return 'A user access token or an API key.';
  }
}

export function securityOf(credentials: Credentials): Array<Record<string, string[]>> {
  switch (credentials) {
    case 'none':
      return [];
    case 'user_session':
      return [{ bearerAuth: [] }];
    default:
      return [{ bearerAuth: [] }, { apiKey: [] }];
  }
}

/** "owner or admin", "owner, admin or developer". */
const either = (names: readonly string[]) => (names.length > 1 ? `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}` : names.join(''));

/** One row of the permission table, in words: who may do it. */
function whoMay(action: Action): string {
  const row: Permission = permissions[action];
  const own = row.ownRoles ? `; also the ${either(row.ownRoles.filter((r) => !row.roles.includes(r)))} who created the object` : '';
  return `${either(row.roles)} may ${row.describes}${own}`;
}

/** The rule of a route in one line for the description, from its proto access option. */
export function accessLine(rule: RpcRule): string {
  switch (rule.kind) {
    case 'public':
      return 'Access: public.';
    case 'account':
      return "Access: any member role; it acts on the caller's own account or memberships.";
    case 'workspace':
      return `Access: in the workspace of the request, the ${whoMay(rule.action)}.`;
    case 'handler':
      return `Access: decided on the object (another workspace's object is a 404): ${rule.actions.map((action) => `the ${whoMay(action)}`).join('; ')}.`;
    default:
      return 'Access: internal.';
  }
}

/**
 * The scope an API key needs for an operation (docs/api/keys.md#scopes), in one sentence, or
 * undefined where no API key is accepted.
 */
export function scopeLine(route: Route): string | undefined {
  if (route.credentials !== 'user_session_or_api_key') return undefined;
  const what = { inference: 'model requests and what they need', read: 'reads', manage: 'changes' }[route.scope];
  const also = route.acceptedScopes.filter((scope) => scope !== route.scope).map((scope) => ` or \`${scope}\``);
  return `API keys need the \`${route.scope}\` scope (${what})${also.join('')}; a user's session needs none.`;
}

/** The machine-readable form of a route's rule: the `x-switchboard-access` extension. */
export function accessExtension(route: Route): Json {
  const { rule } = route;
  const actions = rule.kind === 'workspace' ? [rule.action] : rule.kind === 'handler' ? rule.actions : [];
  return {
    rule: rule.kind,
    credentials: route.credentials,
    ...(actions.length > 0
      ? {
          actions: actions.map((action) => {
            const row: Permission = permissions[action];
            return { action, describes: row.describes, roles: [...row.roles], ...(row.ownRoles ? { roles_on_own_objects: [...row.ownRoles] } : {}) };
          }),
        }
      : {}),
  };
}

/** The role × action table of docs/conventions.md#roles, for the document's introduction. */
export function permissionTable(): string[] {
  const rows = (Object.keys(permissions) as Action[]).map((action) => {
    const row: Permission = permissions[action];
    const cells = roles.map((role) => (row.roles.includes(role) ? 'yes' : row.ownRoles?.includes(role) ? 'own' : 'no'));
    return `| \`${action}\` | ${row.describes} | ${cells.join(' | ')} |`;
  });
  return [`| action | what | ${roles.join(' | ')} |`, `|---|---|${roles.map(() => '---').join('|')}|`, ...rows];
}

/** The two kinds of credentials, both `Authorization: Bearer` (docs/conventions.md). */
export const securitySchemes = {
  bearerAuth: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: 'A user access token (15 minutes) from `POST /v1/auth/login`, `/v1/auth/login/2fa`, `/v1/auth/register` or `/v1/auth/refresh`.',
  },
  apiKey: {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key `sb_…` from `POST /v1/keys`; it acts as the user who created it, inside its own workspace.',
  },
};
