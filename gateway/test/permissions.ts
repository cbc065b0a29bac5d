import { expect } from 'vitest';
import type { Mailbox } from './mailbox.js';
import type { ApiResponse, restClient } from './mesh.js';
import { newUser } from './mesh.js';

/**
 * THE table of who may call which REST route (SPEC §3's permission table, route by route), walked
 * by permissions.test.ts with a principal of each role in a workspace and a principal of another
 * workspace. Later issues add their routes here (keys, billing, conversations, webhooks): a route
 * of the contract that answers something other than 501 must have a row, the walk checks it.
 */

export type Principal = 'owner' | 'admin' | 'developer' | 'outsider';
export const principals: Principal[] = ['owner', 'admin', 'developer', 'outsider'];

type Call = ReturnType<typeof restClient>;

export interface User {
  userId: string;
  email: string;
  password: string;
  token: string;
  personalWorkspaceId: string;
}

/** One organization with an owner, an admin, a developer, a further developer (`target`) and a pending invitation. */
export interface Workspace {
  orgId: string;
  name: string;
  users: Record<Principal | 'target', User>;
  pendingInvitationId: string;
  pendingInvitationToken: string;
}

export interface RouteCase {
  /** The RPC behind the route (informative; the walk matches routes by method and template). */
  rpc: string;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** The canonical template, exactly as the proto's google.api.http annotation writes it. */
  template: string;
  path(ws: Workspace): string;
  body?(ws: Workspace, as: Principal): unknown;
  /** The status each principal gets. The outsider is a member of another workspace only. */
  expect: Record<Principal, number>;
  /** The call changes the workspace: every principal gets a workspace of its own. */
  mutates?: boolean;
  /** Further checks of a response. */
  check?(response: ApiResponse, ws: Workspace, as: Principal): void;
}

const managersOnly = { owner: 200, admin: 200, developer: 403, outsider: 404 };
const everyMember = { owner: 200, admin: 200, developer: 200, outsider: 404 };

let invitationCounter = 0;
const freshAddress = () => {
  invitationCounter += 1;
  return `invitee${Date.now().toString(36)}${invitationCounter}@example.com`;
};

export const routeCases: RouteCase[] = [
  // --- identity: organizations (issue 4) -----------------------------------------------------
  {
    rpc: 'CreateOrganization',
    method: 'POST',
    template: '/v1/organizations',
    path: () => '/v1/organizations',
    body: (_ws, as) => ({ name: `Made by ${as}` }),
    // Not workspace-scoped: every signed-in user may create one (and owns it).
    expect: { owner: 201, admin: 201, developer: 201, outsider: 201 },
    check: (response) => expect(response.json.organization).toMatchObject({ org_id: expect.stringMatching(/^org_/), role: 'owner' }),
  },
  {
    rpc: 'ListOrganizations',
    method: 'GET',
    template: '/v1/organizations',
    path: () => '/v1/organizations?limit=100',
    expect: { owner: 200, admin: 200, developer: 200, outsider: 200 },
    check: (response, ws, as) => {
      const ids = response.json.data.map((org: { org_id: string }) => org.org_id);
      if (as === 'outsider') expect(ids).not.toContain(ws.orgId);
      else expect(response.json.data.find((org: { org_id: string }) => org.org_id === ws.orgId)).toMatchObject({ role: as });
    },
  },
  {
    rpc: 'GetOrganization',
    method: 'GET',
    template: '/v1/organizations/{org_id}',
    path: (ws) => `/v1/organizations/${ws.orgId}`,
    expect: everyMember,
    check: (response, ws, as) => {
      if (as !== 'outsider') expect(response.json).toMatchObject({ org_id: ws.orgId, name: ws.name, role: as, personal: false });
    },
  },
  {
    rpc: 'DeleteOrganization',
    method: 'DELETE',
    template: '/v1/organizations/{org_id}',
    path: (ws) => `/v1/organizations/${ws.orgId}`,
    expect: { owner: 204, admin: 403, developer: 403, outsider: 404 },
    mutates: true,
  },
  {
    rpc: 'CreateInvitation',
    method: 'POST',
    template: '/v1/organizations/{org_id}/invitations',
    path: (ws) => `/v1/organizations/${ws.orgId}/invitations`,
    body: () => ({ email: freshAddress(), role: 'developer' }),
    expect: { owner: 201, admin: 201, developer: 403, outsider: 404 },
    mutates: true,
    check: (response, ws, as) => {
      if (response.status === 201)
        expect(response.json).toMatchObject({ org_id: ws.orgId, role: 'developer', status: 'pending', invited_by: ws.users[as].userId });
    },
  },
  {
    rpc: 'ListInvitations',
    method: 'GET',
    template: '/v1/organizations/{org_id}/invitations',
    path: (ws) => `/v1/organizations/${ws.orgId}/invitations`,
    expect: managersOnly,
    check: (response, ws) => {
      if (response.status === 200) expect(response.json.data.map((i: { invitation_id: string }) => i.invitation_id)).toContain(ws.pendingInvitationId);
    },
  },
  {
    rpc: 'RevokeInvitation',
    method: 'DELETE',
    template: '/v1/organizations/{org_id}/invitations/{invitation_id}',
    path: (ws) => `/v1/organizations/${ws.orgId}/invitations/${ws.pendingInvitationId}`,
    expect: { owner: 204, admin: 204, developer: 403, outsider: 404 },
    mutates: true,
  },
  {
    rpc: 'AcceptInvitation',
    method: 'POST',
    template: '/v1/invitations/accept',
    path: () => '/v1/invitations/accept',
    body: (ws) => ({ token: ws.pendingInvitationToken }),
    // The pending invitation is for another address than any of theirs: 403 for everyone.
    expect: { owner: 403, admin: 403, developer: 403, outsider: 403 },
    check: (response) => expect(response.json.error.code).toBe('invitation_email_mismatch'),
  },
  {
    rpc: 'ListMembers',
    method: 'GET',
    template: '/v1/organizations/{org_id}/members',
    path: (ws) => `/v1/organizations/${ws.orgId}/members`,
    expect: everyMember,
    check: (response, ws, as) => {
      if (as === 'outsider') return;
      const roles = Object.fromEntries(response.json.data.map((m: { user_id: string; role: string }) => [m.user_id, m.role]));
      expect(roles).toEqual({
        [ws.users.owner.userId]: 'owner',
        [ws.users.admin.userId]: 'admin',
        [ws.users.developer.userId]: 'developer',
        [ws.users.target.userId]: 'developer',
      });
    },
  },
  {
    rpc: 'UpdateMember',
    method: 'PATCH',
    template: '/v1/organizations/{org_id}/members/{user_id}',
    path: (ws) => `/v1/organizations/${ws.orgId}/members/${ws.users.target.userId}`,
    body: () => ({ role: 'admin' }),
    expect: managersOnly,
    mutates: true,
    check: (response, ws) => {
      if (response.status === 200) expect(response.json).toMatchObject({ user_id: ws.users.target.userId, role: 'admin' });
    },
  },
  {
    rpc: 'RemoveMember',
    method: 'DELETE',
    template: '/v1/organizations/{org_id}/members/{user_id}',
    path: (ws) => `/v1/organizations/${ws.orgId}/members/${ws.users.target.userId}`,
    expect: { owner: 204, admin: 204, developer: 403, outsider: 404 },
    mutates: true,
  },
  {
    rpc: 'TransferOwnership',
    method: 'POST',
    template: '/v1/organizations/{org_id}/transfer-ownership',
    path: (ws) => `/v1/organizations/${ws.orgId}/transfer-ownership`,
    body: (ws) => ({ new_owner_user_id: ws.users.target.userId }),
    expect: { owner: 200, admin: 403, developer: 403, outsider: 404 },
    mutates: true,
    check: (response, ws) => {
      if (response.status === 200) expect(response.json).toMatchObject({ org_id: ws.orgId, role: 'admin' });
    },
  },
  // --- keys, billing, conversations, webhooks: rows land with their issues -----------------------
];

/**
 * Services whose routes act on the caller's own account, not in a workspace: the permission
 * table does not apply to them (they are covered by the account tests).
 */
export const accountScopedServices = ['switchboard.identity.v1.AuthService', 'switchboard.identity.v1.AccountService'];

/** Registers users and builds workspaces through REST, reading invitation tokens from the mailbox. */
export class World {
  private readonly users = new Map<string, User>();

  constructor(
    private readonly call: Call,
    private readonly mailbox: Mailbox,
  ) {}

  async user(label: string): Promise<User> {
    const existing = this.users.get(label);
    if (existing) return existing;
    const registration = newUser();
    const response = await this.call('POST', '/v1/auth/register', { body: registration });
    expect(response.status).toBe(201);
    const user: User = {
      userId: response.json.user.user_id,
      email: registration.email,
      password: registration.password,
      token: response.json.session.access_token,
      personalWorkspaceId: response.json.user.personal_workspace_id,
    };
    this.users.set(label, user);
    return user;
  }

  /** Invites `email` to `orgId` as `inviter` and returns the invitation and the mailed token. */
  async invite(inviter: User, orgId: string, orgName: string, email: string, role: string): Promise<{ invitationId: string; token: string }> {
    const response = await this.call('POST', `/v1/organizations/${orgId}/invitations`, { token: inviter.token, body: { email, role } });
    expect(response.status, response.text).toBe(201);
    return { invitationId: response.json.invitation_id, token: await this.mailbox.invitationToken(email, orgName) };
  }

  async accept(user: User, token: string): Promise<ApiResponse> {
    return this.call('POST', '/v1/invitations/accept', { token: user.token, body: { token } });
  }

  /** A fresh organization of the shared users (owner, admin, developer, target), plus a pending invitation. */
  async workspace(): Promise<Workspace> {
    const users = {
      owner: await this.user('owner'),
      admin: await this.user('admin'),
      developer: await this.user('developer'),
      target: await this.user('target'),
      outsider: await this.user('outsider'),
    };
    const name = `Org ${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    const created = await this.call('POST', '/v1/organizations', { token: users.owner.token, body: { name } });
    expect(created.status, created.text).toBe(201);
    const orgId = created.json.organization.org_id as string;
    for (const [label, role] of [
      ['admin', 'admin'],
      ['developer', 'developer'],
      ['target', 'developer'],
    ] as const) {
      const { token } = await this.invite(users.owner, orgId, name, users[label].email, role);
      const accepted = await this.accept(users[label], token);
      expect(accepted.status, accepted.text).toBe(200);
    }
    const pending = await this.invite(users.owner, orgId, name, freshAddress(), 'developer');
    return { orgId, name, users, pendingInvitationId: pending.invitationId, pendingInvitationToken: pending.token };
  }
}
