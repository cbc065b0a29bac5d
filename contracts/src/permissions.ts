/**
 * The roles of a workspace and the permission table of docs/api/identity.md: action → the roles
 * allowed. Actions are `<resource>.<verb>`, the rows of that table; the protos' access options
 * (`switchboard.api.v1.access`) name them, and runtime/src/policy.ts applies them.
 */

export const roles = ['owner', 'admin', 'developer'] as const;
export type Role = (typeof roles)[number];

export function isRole(value: string): value is Role {
  return (roles as readonly string[]).includes(value);
}

const everyone: readonly Role[] = roles;
const managers: readonly Role[] = ['owner', 'admin'];
const ownerOnly: readonly Role[] = ['owner'];

/** A row of the permission table. */
export interface Permission {
  /** Roles allowed on any object of the workspace. */
  roles: readonly Role[];
  /** Roles also allowed when the caller owns the object (`ownerId` = the caller). */
  ownRoles?: readonly Role[];
  /** The row of the permission table this action belongs to, for messages and docs. */
  describes: string;
}

/** Action → rule. */
export const permissions = {
  // organizations
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
  // conversations, messages, feedback
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
  'billing.read': { roles: everyone, describes: 'read billing (balance, usage, plan, hint, top-ups, ledger, statements, payment methods)' },
  'billing.topup': { roles: managers, describes: 'top up or check out' },
  'billing.manage': { roles: managers, describes: 'save or remove payment methods, read and set auto top-up' },
  // audit log and exports
  'audit.read': { roles: managers, describes: 'read the audit log' },
  // webhooks
  'webhooks.read': { roles: managers, describes: 'read webhooks and deliveries' },
  'webhooks.manage': { roles: managers, describes: 'manage webhooks' },
} as const satisfies Record<string, Permission>;

export type Action = keyof typeof permissions;
