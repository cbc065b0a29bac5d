import { describe, expect, it } from 'vitest';
import { allows, mayGrant, mayManageMember, permissions, roles, type Action } from '../src/policy.js';

/** The SPEC §3 permission table, row by row, as the policy module encodes it. */
const table: Array<[string, Action[], Record<(typeof roles)[number], boolean>]> = [
  ['conversations, messages, feedback', ['conversations.read', 'conversations.write', 'feedback.read', 'feedback.write'], { owner: true, admin: true, developer: true }],
  ['create keys', ['keys.create', 'keys.read'], { owner: true, admin: true, developer: true }],
  ['change or revoke any key', ['keys.manage'], { owner: true, admin: true, developer: false }],
  ['billing reads', ['billing.read'], { owner: true, admin: true, developer: true }],
  ['top-up / checkout', ['billing.topup'], { owner: true, admin: true, developer: false }],
  ['webhooks', ['webhooks.read', 'webhooks.manage'], { owner: true, admin: true, developer: false }],
  ['invite, remove members; change roles', ['members.invite', 'members.remove', 'members.update_role', 'invitations.read', 'invitations.revoke'], { owner: true, admin: true, developer: false }],
  ['transfer ownership, delete organization', ['organization.transfer_ownership', 'organization.delete'], { owner: true, admin: false, developer: false }],
  ['read the organization and its members', ['organization.read', 'members.read'], { owner: true, admin: true, developer: true }],
];

describe('the permission table', () => {
  for (const [row, actions, expected] of table) {
    it(row, () => {
      for (const action of actions) for (const role of roles) expect(allows(role, action), `${role} ${action}`).toBe(expected[role]);
    });
  }

  it('covers every action', () => {
    expect(new Set(table.flatMap(([, actions]) => actions))).toEqual(new Set(Object.keys(permissions)));
  });

  it('lets a developer change or revoke its own keys only', () => {
    expect(allows('developer', 'keys.manage', true)).toBe(true);
    expect(allows('developer', 'keys.manage', false)).toBe(false);
  });

  it('refuses unknown or missing roles', () => {
    expect(allows(undefined, 'conversations.read')).toBe(false);
    expect(allows('superuser', 'conversations.read')).toBe(false);
  });

  it('grants roles at or below the granter, never owner; nobody manages the owner', () => {
    expect(mayGrant('admin', 'admin')).toBe(true);
    expect(mayGrant('admin', 'developer')).toBe(true);
    expect(mayGrant('developer', 'admin')).toBe(false);
    expect(mayGrant('owner', 'owner')).toBe(false);
    expect(mayManageMember('admin', 'owner')).toBe(false);
    expect(mayManageMember('admin', 'admin')).toBe(true);
    expect(mayManageMember('owner', 'developer')).toBe(true);
  });
});
