import type { Client } from '@connectrpc/connect';
import type { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { type KeyScopeName, keyScopes } from '@switchboard/runtime/policy';
import { eventually } from '@switchboard/runtime/testing';
import { expect } from 'vitest';
import type { Mailbox } from './mailbox.js';
import type { ApiResponse, restClient } from './mesh.js';
import { newUser } from './mesh.js';

/**
 * THE table of who may call which REST route (the permission table of docs/conventions.md#roles, route by route), walked
 * by permissions.test.ts with a principal of each role in a workspace and a principal of another
 * workspace, and with API keys of the owner that have one scope each (docs/api/keys.md#scopes).
 * Later issues add their routes here (keys, billing, conversations, webhooks): a route of the
 * contract that answers something other than 501 must have a row, the walk checks it.
 */

export type Principal = 'owner' | 'admin' | 'developer' | 'outsider';
export const principals: Principal[] = ['owner', 'admin', 'developer', 'outsider'];

/**
 * Who makes a call of the walk: a principal, acting on the object its row names (for a key: one
 * that another member created), or `developerOnOwn`, the developer acting on an object it created
 * itself (docs/conventions.md#roles: "change or revoke own keys"), walked for the rows that expect it.
 */
export type Caller = Principal | 'developerOnOwn';

/** The principal whose token and workspace a caller's calls use. */
export const principalOf = (as: Caller): Principal => (as === 'developerOnOwn' ? 'developer' : as);

/** The members of a workspace's organization. */
export type Member = 'owner' | 'admin' | 'developer' | 'target';
const members: Member[] = ['owner', 'admin', 'developer', 'target'];

type Call = ReturnType<typeof restClient>;

export interface User {
  userId: string;
  email: string;
  password: string;
  token: string;
  personalWorkspaceId: string;
}

/**
 * One organization with an owner, an admin, a developer, a further developer (`target`), a key
 * created by each of them, a pending invitation, a conversation with a message, and a generation
 * recorded by the data plane.
 */
export interface Workspace {
  orgId: string;
  name: string;
  users: Record<Principal | 'target', User>;
  /** The key_id of the key each member created in the organization (named after it and the organization, with an alert webhook). */
  keys: Record<Member, string>;
  pendingInvitationId: string;
  pendingInvitationToken: string;
  /** A conversation `target` created (its title and metadata name the organization), with one message. */
  conversationId: string;
  /**
   * A generation of the organization (service/fast, routed to gpt-4o-mini), recorded through
   * RecordUsage with the owner's inference key (`scopedKeys.inference`: its own generation; the
   * spend it adds reaches that key later, and no row reads that key's spend).
   */
  generationId: string;
  /** A webhook endpoint the owner registered in the organization (it fails: nothing answers there). */
  webhookId: string;
  /**
   * A key of the owner in the organization per scope, with that scope only (docs/api/keys.md#scopes).
   * The workspace's generation is the `inference` key's own.
   */
  scopedKeys: Record<KeyScopeName, ScopedKey>;
  /** The webhook.test delivery of that endpoint, attempted once. */
  deliveryId: string;
}

/** An API key with its full key, to call with. */
export interface ScopedKey {
  keyId: string;
  fullKey: string;
}

/** The scopes of the walk's keys: one key per scope. */
export const walkedScopes: readonly KeyScopeName[] = keyScopes;

/** What an API key of the owner that has the route's scope gets, where it is not what the owner gets. */
export interface KeyOutcome {
  status: number;
  /** The error code of a refusal. */
  code?: string;
  /** The error's metadata, when it has some. */
  metadata?: Record<string, unknown>;
  /** Checks of a success, instead of the row's own (made as the owner). */
  check?(response: ApiResponse, ws: Workspace, world: World): void | Promise<void>;
}

export interface RouteCase {
  /** The RPC behind the route (informative; the walk matches routes by method and template). */
  rpc: string;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** The canonical template, exactly as the proto's google.api.http annotation writes it. */
  template: string;
  path(ws: Workspace, as: Caller): string;
  body?(ws: Workspace, as: Caller): unknown;
  /**
   * The status each principal gets. The outsider is a member of another workspace only. With
   * `developerOnOwn`, the walk also calls as the developer on its own object.
   */
  expect: Record<Principal, number> & { developerOnOwn?: number };
  /** The error code of a 404 (the object is not visible to the caller); organization_not_found when not given. */
  notFoundCode?: string;
  /** The call changes the workspace: every principal gets a workspace of its own. */
  mutates?: boolean;
  /** The path of a GET (as the owner) reading the object the call changes: a refused call must leave it as it was. */
  subject?(ws: Workspace, as: Caller): string;
  /** The answer shows a full key (docs/api/keys.md#the-full-key: only the answer that creates it); no other answer may. */
  showsFullKey?: boolean;
  /** Further checks of a response; `world` makes further calls. */
  check?(response: ApiResponse, ws: Workspace, as: Caller, world: World): void | Promise<void>;
  /**
   * The scope an API key needs (docs/api/keys.md#scopes) where it is not the method's (`read` for a
   * GET, `manage` for any other): the `inference` routes.
   */
  scope?: KeyScopeName;
  /** Other scopes that also admit a key (the rule's `also_scopes`): the generation routes. */
  alsoScopes?: KeyScopeName[];
  /**
   * What the owner's key with the route's scope gets, where it differs from the owner (it acts as
   * the owner, after the owner's call of the row): by default the owner's status and the row's
   * checks made as the owner.
   */
  asKey?: KeyOutcome;
}

/** The scope an API key needs for a row's route, as docs/api/keys.md#scopes states it. */
export const scopeOfRow = (row: RouteCase): KeyScopeName => row.scope ?? (row.method === 'GET' ? 'read' : 'manage');

const managersOnly = { owner: 200, admin: 200, developer: 403, outsider: 404 };
const everyMember = { owner: 200, admin: 200, developer: 200, outsider: 404 };
/** docs/conventions.md#roles: every member changes or revokes its own keys, owners and admins any key of the workspace. */
const creatorOrManagers = { ...managersOnly, developerOnOwn: 200 };

/** Whose key a caller acts on: `target`'s (another member's), or for `developerOnOwn` the developer's own. */
const keyCreatorOf = (as: Caller): Member => (as === 'developerOnOwn' ? 'developer' : 'target');
const keyPath = (ws: Workspace, as: Caller) => `/v1/keys/${ws.keys[keyCreatorOf(as)]}`;

/** The alert webhook every key of a workspace starts with, and the one the walk sets. */
const initialAlertUrl = 'https://alerts.example.com/initial';
const alertUrl = 'https://alerts.example.com/hook';

/**
 * The row of a call that changes one key and answers it (docs/api/keys.md): on the key of `keyCreatorOf`,
 * in a fresh workspace for every caller; `changed` checks the answer of a success.
 */
function keyChange(row: Pick<RouteCase, 'rpc' | 'method' | 'template' | 'body'> & { changed(key: ApiResponse['json'], as: Caller): void }): RouteCase {
  const { changed, ...route } = row;
  return {
    ...route,
    path: (ws, as) => row.template.replace('{key_id}', ws.keys[keyCreatorOf(as)]),
    expect: creatorOrManagers,
    notFoundCode: 'key_not_found',
    mutates: true,
    subject: keyPath,
    check: (response, ws, as) => {
      if (response.status !== 200) return;
      const creator = keyCreatorOf(as);
      expect(response.json).toMatchObject({ key_id: ws.keys[creator], created_by: ws.users[creator].userId });
      changed(response.json, as);
    },
  };
}

/** docs/conventions.md#roles: billing reads for every member; the outsider reads (and tops up) its own workspace. */
const everyWorkspace = { owner: 200, admin: 200, developer: 200, outsider: 200 };
const decimal = /^-?\d+(\.\d+)?$/;

const webhooksPath = (ws: Workspace) => `/v1/workspaces/${ws.orgId}/webhooks`;
const webhookPath = (ws: Workspace) => `${webhooksPath(ws)}/${ws.webhookId}`;
const deliveryPath = (ws: Workspace) => `${webhookPath(ws)}/deliveries/${ws.deliveryId}`;
const conversationPath = (ws: Workspace) => `/v1/conversations/${ws.conversationId}`;
/** The feedback_id of the first rating of each workspace's generation (later ratings replace it, keeping the id). */
const firstFeedback = new Map<string, string>();

let idempotencyCounter = 0;
/** A top-up's idempotency key used by no other call. */
const freshIdempotencyKey = () => {
  idempotencyCounter += 1;
  return `walk-${Date.now().toString(36)}-${idempotencyCounter}`;
};

/** The checkout_ids of the top-ups `as` lists in the workspace it acts in. */
async function topupIds(world: World, ws: Workspace, as: Caller): Promise<string[]> {
  const listed = await world.callAs(ws, as, 'GET', '/v1/billing/topups?limit=100');
  expect(listed.status, listed.text).toBe(200);
  return listed.json.data.map((topup: { checkout_id: string }) => topup.checkout_id);
}

/**
 * The row of a route that starts a top-up (docs/conventions.md#roles: owners and admins; docs/api/billing.md#top-ups: checkout and
 * topup answer the same): a pending checkout in the caller's workspace, and only there.
 */
function topupStart(rpc: string, template: string): RouteCase {
  return {
    rpc,
    method: 'POST',
    template,
    path: () => template,
    body: () => ({ amount_usd: '5.00', idempotency_key: freshIdempotencyKey() }),
    // The outsider starts one in its own workspace.
    expect: { owner: 201, admin: 201, developer: 403, outsider: 201 },
    // A refused call leaves the workspace's top-ups as they were.
    subject: () => '/v1/billing/topups?limit=100',
    check: async (response, ws, as, world) => {
      if (response.status !== 201) return;
      expect(response.json).toMatchObject({
        checkout_id: expect.stringMatching(/^chk_/),
        checkout_url: expect.stringContaining('/v1/billing/sandbox/checkout/'),
        amount_usd: '5.00',
        status: 'pending',
        idempotency_key: expect.stringMatching(/^walk-/),
        completed_at: null,
      });
      const checkoutId: string = response.json.checkout_id;
      expect(await topupIds(world, ws, as)).toContain(checkoutId);
      const inWorkspace = await topupIds(world, ws, 'owner');
      if (as === 'outsider') expect(inWorkspace).not.toContain(checkoutId);
      else expect(inWorkspace).toContain(checkoutId);
    },
  };
}

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
        expect(response.json).toMatchObject({ org_id: ws.orgId, role: 'developer', status: 'pending', invited_by: ws.users[principalOf(as)].userId });
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
  // --- keys ------------------------------------------------------------------------------------
  {
    rpc: 'CreateKey',
    method: 'POST',
    template: '/v1/keys',
    path: () => '/v1/keys',
    body: (_ws, as) => ({ name: `Made by ${as}` }),
    // Every member creates keys in the workspace; the outsider, acting in its own, creates one there.
    expect: { owner: 201, admin: 201, developer: 201, outsider: 201 },
    showsFullKey: true,
    // docs/api/keys.md#scopes: a key never makes a key with scopes it lacks; without `scopes` the new key would have all three.
    asKey: { status: 403, code: 'insufficient_scope', metadata: { required_scope: 'inference' } },
    check: async (response, ws, as, world) => {
      const user = ws.users[principalOf(as)];
      expect(response.json).toMatchObject({
        full_key: expect.stringMatching(/^sb_[0-9A-Za-z]{49}$/),
        key: { key_id: expect.stringMatching(/^key_/), name: `Made by ${as}`, status: 'active', created_by: user.userId },
      });
      // The key belongs to the workspace the caller acted in, and only to it.
      const path = `/v1/keys/${response.json.key.key_id}`;
      expect((await world.callAs(ws, as, 'GET', path)).status).toBe(200);
      expect((await world.callAs(ws, 'owner', 'GET', path)).status).toBe(as === 'outsider' ? 404 : 200);
    },
  },
  {
    rpc: 'ListKeys',
    method: 'GET',
    template: '/v1/keys',
    path: () => '/v1/keys?limit=100',
    // The outsider lists the keys of its own workspace.
    expect: { owner: 200, admin: 200, developer: 200, outsider: 200 },
    check: (response, ws, as) => {
      const listed: { key_id: string; created_by: string }[] = response.json.data;
      const ids = listed.map((key) => key.key_id);
      if (as === 'outsider') {
        for (const keyId of Object.values(ws.keys)) expect(ids).not.toContain(keyId);
        // Its workspace is its personal one, where it is the only member.
        for (const key of listed) expect(key.created_by).toBe(ws.users.outsider.userId);
      } else {
        expect(ids).toEqual(expect.arrayContaining(Object.values(ws.keys)));
        const memberIds = members.map((member) => ws.users[member].userId);
        for (const key of listed) expect(memberIds).toContain(key.created_by);
      }
    },
  },
  {
    rpc: 'GetKey',
    method: 'GET',
    template: '/v1/keys/{key_id}',
    path: keyPath,
    expect: everyMember,
    notFoundCode: 'key_not_found',
    check: (response, ws) => {
      if (response.status === 200) expect(response.json).toMatchObject({ key_id: ws.keys.target, created_by: ws.users.target.userId, status: 'active' });
    },
  },
  keyChange({
    rpc: 'UpdateKey',
    method: 'PATCH',
    template: '/v1/keys/{key_id}',
    body: (_ws, as) => ({ name: `Renamed by ${as}` }),
    changed: (key, as) => expect(key.name).toBe(`Renamed by ${as}`),
  }),
  keyChange({
    rpc: 'UpdateSpendCap',
    method: 'PATCH',
    template: '/v1/keys/{key_id}/spend-cap',
    body: () => ({ monthly_spend_cap_usd: '5' }),
    changed: (key) => expect(key.monthly_spend_cap_usd).toBe('5'),
  }),
  keyChange({
    rpc: 'SetAlertWebhook',
    method: 'PUT',
    template: '/v1/keys/{key_id}/alert-webhook',
    body: () => ({ url: alertUrl }),
    changed: (key) => expect(key).toMatchObject({ alert_webhook_url: alertUrl, alert_threshold_pct: 80, signing_secret: expect.stringMatching(/^whsec_/) }),
  }),
  keyChange({
    rpc: 'DeleteAlertWebhook',
    method: 'DELETE',
    template: '/v1/keys/{key_id}/alert-webhook',
    changed: (key) => expect(key).toMatchObject({ alert_webhook_url: null, alert_threshold_pct: null }),
  }),
  keyChange({
    rpc: 'SetRoutingPolicy',
    method: 'PUT',
    template: '/v1/keys/{key_id}/routing-policy',
    body: () => ({ routing_policy: 'cn-only' }),
    changed: (key) => expect(key.routing_policy).toBe('cn-only'),
  }),
  keyChange({
    rpc: 'RevokeKey',
    method: 'DELETE',
    template: '/v1/keys/{key_id}',
    changed: (key) => expect(key).toMatchObject({ status: 'revoked', revoked_at: expect.any(String) }),
  }),
  keyChange({
    rpc: 'UpdateKeySpendLimits',
    method: 'PUT',
    template: '/v1/keys/{key_id}/spend-limits',
    body: () => ({
      spend_limits: [
        { period: 'day', amount_usd: '5' },
        { period: 'month', amount_usd: '50.00' },
      ],
    }),
    changed: (key) => {
      // docs/api/keys.md#periodic-budgets: the month's limit is the monthly spend cap.
      expect(key.monthly_spend_cap_usd).toBe('50.00');
      const budget = (period: string, amount: string) =>
        expect.objectContaining({ period, amount_usd: amount, spend_usd: expect.stringMatching(decimal), resets_at: expect.any(String) });
      expect(key.spend_limits).toEqual(expect.arrayContaining([budget('day', '5'), budget('month', '50.00')]));
      expect(key.spend_limits).toHaveLength(2);
    },
  }),
  {
    rpc: 'RotateKey',
    method: 'POST',
    template: '/v1/keys/{key_id}/rotate',
    path: (ws, as) => `${keyPath(ws, as)}/rotate`,
    body: () => ({ grace_period_seconds: 3600 }),
    // Rotating changes the key (it expires): whoever may change it (docs/conventions.md#roles).
    expect: { owner: 201, admin: 201, developer: 403, outsider: 404, developerOnOwn: 201 },
    notFoundCode: 'key_not_found',
    mutates: true,
    subject: keyPath,
    showsFullKey: true,
    // docs/api/keys.md#rotation: the new key has the old one's scopes, all three here, which the manage key lacks.
    asKey: { status: 403, code: 'insufficient_scope', metadata: { required_scope: 'inference' } },
    check: async (response, ws, as, world) => {
      if (response.status !== 201) return;
      const creator = keyCreatorOf(as);
      const previousId = ws.keys[creator];
      expect(response.json).toMatchObject({
        full_key: expect.stringMatching(/^sb_[0-9A-Za-z]{49}$/),
        key: {
          key_id: expect.stringMatching(/^key_/),
          name: `${creator}'s key in ${ws.name}`,
          status: 'active',
          rotated_from: previousId,
          created_by: ws.users[principalOf(as)].userId,
          alert_webhook_url: initialAlertUrl,
        },
        previous: { key_id: previousId, status: 'active', expires_at: expect.any(String) },
      });
      expect(response.json.key.key_id).not.toBe(previousId);
      // The old key works for the grace period (an hour), not longer.
      expect(Math.abs(Date.parse(response.json.previous.expires_at) - (Date.now() + 3_600_000))).toBeLessThan(60_000);
      // The new key belongs to the workspace.
      expect((await world.callAs(ws, 'owner', 'GET', `/v1/keys/${response.json.key.key_id}`)).status).toBe(200);
    },
  },
  {
    rpc: 'GetCurrentKey',
    method: 'GET',
    template: '/v1/key',
    path: () => '/v1/key',
    scope: 'inference',
    // docs/api/keys.md#introspection: the API key of the request; the walk's principals are users, whose access token is no key.
    expect: { owner: 400, admin: 400, developer: 400, outsider: 400 },
    check: (response) => expect(response.json.error.code).toBe('api_key_required'),
    asKey: {
      status: 200,
      check: (response, ws) =>
        expect(response.json).toMatchObject({
          key_id: ws.scopedKeys.inference.keyId,
          name: `the inference key in ${ws.name}`,
          scopes: ['inference'],
          expires_at: null,
          allowed_models: null,
          rate_limits: { requests_per_minute: null, tokens_per_minute: null, max_concurrent: null },
          routing_policy: 'any',
          spend: [],
        }),
    },
  },
  // --- billing ---------------------------------------------------------------------------------
  // Every billing route acts in the caller's workspace (X-Workspace-Id); the outsider acts in its
  // own personal workspace, so it gets its own billing (200, 201), never this workspace's.
  {
    rpc: 'GetBalance',
    method: 'GET',
    template: '/v1/billing/balance',
    path: () => '/v1/billing/balance',
    expect: everyWorkspace,
    check: async (response, ws, as, world) => {
      expect(response.json).toEqual({ balance_usd: expect.stringMatching(decimal), currency: 'USD', updated_at: expect.any(String) });
      if (as !== 'outsider') {
        expect(response.json.balance_usd).toBe((await world.callAs(ws, 'owner', 'GET', '/v1/billing/balance')).json.balance_usd);
        return;
      }
      // A top-up paid in this workspace credits this workspace, never the outsider's.
      const before = Number((await world.callAs(ws, 'owner', 'GET', '/v1/billing/balance')).json.balance_usd);
      await world.paidTopup(ws, '7.00');
      expect(Number((await world.callAs(ws, 'owner', 'GET', '/v1/billing/balance')).json.balance_usd)).toBeCloseTo(before + 7, 6);
      expect((await world.callAs(ws, 'outsider', 'GET', '/v1/billing/balance')).json.balance_usd).toBe(response.json.balance_usd);
    },
  },
  {
    rpc: 'GetUsage',
    method: 'GET',
    template: '/v1/billing/usage',
    path: () => '/v1/billing/usage?days=7',
    expect: everyWorkspace,
    check: (response) => {
      expect(response.json).toMatchObject({ days: 7, total_cost_usd: expect.stringMatching(decimal) });
      expect(response.json.data).toHaveLength(7);
    },
  },
  {
    rpc: 'GetUsageReport',
    method: 'GET',
    template: '/v1/usage',
    path: () => '/v1/usage?group_by=key,model&bucket=day',
    expect: everyWorkspace,
    check: (response) => {
      expect(response.json).toMatchObject({ bucket: 'day', start: expect.any(String), end: expect.any(String) });
      expect(Array.isArray(response.json.data)).toBe(true);
    },
  },
  {
    rpc: 'GetUsageByTier',
    method: 'GET',
    template: '/v1/billing/usage/by-tier',
    path: () => '/v1/billing/usage/by-tier',
    expect: everyWorkspace,
    check: (response) => {
      const tier = { cost_usd: expect.stringMatching(decimal), requests: expect.any(Number) };
      expect(response.json).toEqual({ days: 30, by_tier: { fast: tier, balanced: tier, passthrough: tier, byok: tier } });
    },
  },
  {
    rpc: 'GetPlan',
    method: 'GET',
    template: '/v1/billing/plan',
    path: () => '/v1/billing/plan',
    expect: everyWorkspace,
    check: (response) => expect(response.json.plan).toMatchObject({ plan_id: 'payg', monthly_fee_usd: expect.stringMatching(decimal) }),
  },
  {
    rpc: 'GetUpgradeHint',
    method: 'GET',
    template: '/v1/billing/upgrade-hint',
    path: () => '/v1/billing/upgrade-hint',
    expect: everyWorkspace,
    // Too little usage in either workspace for a plan with a monthly fee to pay off: no advice.
    check: (response) => expect(response.json).toEqual({ hint: {} }),
  },
  {
    rpc: 'GetPrices',
    method: 'GET',
    template: '/v1/billing/prices',
    path: () => '/v1/billing/prices',
    expect: everyWorkspace,
    check: (response) => {
      const price = { input_usd_per_1m: expect.stringMatching(decimal), output_usd_per_1m: expect.stringMatching(decimal) };
      expect(response.json).toMatchObject({
        version: expect.any(String),
        tiers: [
          { tier: 'fast', ...price },
          { tier: 'balanced', ...price },
        ],
      });
      expect(response.json.models.length).toBeGreaterThan(0);
    },
  },
  {
    rpc: 'ListGenerations',
    method: 'GET',
    template: '/v1/generations',
    path: () => '/v1/generations?limit=100',
    // The outsider lists its own workspace's generations: none of this one.
    expect: everyWorkspace,
    check: (response, ws, as) => {
      const ids = response.json.data.map((generation: { generation_id: string }) => generation.generation_id);
      if (as === 'outsider') expect(ids).not.toContain(ws.generationId);
      else expect(ids).toContain(ws.generationId);
    },
    // docs/api/generations.md#who-sees-what: a `read` key lists the workspace's generations, an
    // `inference` key those made with it (the workspace's generation is the inference key's).
    alsoScopes: ['inference'],
  },
  {
    rpc: 'GetGenerationRecord',
    method: 'GET',
    template: '/v1/generations/{generation_id}',
    path: (ws) => `/v1/generations/${ws.generationId}`,
    // docs/api/keys.md#scopes: a key's own generations need inference only (the workspace's generation is the inference key's),
    // and a `read` key sees the workspace's.
    scope: 'inference',
    alsoScopes: ['read'],
    expect: everyMember,
    notFoundCode: 'generation_not_found',
    check: (response, ws) => {
      if (response.status === 200) expect(response.json).toMatchObject({ generation_id: ws.generationId, model: 'service/fast', tier: 'fast' });
    },
  },
  {
    rpc: 'ListLedgerEntries',
    method: 'GET',
    template: '/v1/billing/ledger',
    path: () => '/v1/billing/ledger?limit=100',
    expect: everyWorkspace,
    check: async (response, ws, as, world) => {
      expect(response.json).toMatchObject({ data: expect.any(Array), has_more: false });
      // The entries sum to the balance of the workspace the caller acts in (the outsider: its own).
      const sum = response.json.data.reduce((total: number, entry: { amount_usd: string }) => total + Number(entry.amount_usd), 0);
      const balance = await world.callAs(ws, as, 'GET', '/v1/billing/balance');
      expect(sum).toBeCloseTo(Number(balance.json.balance_usd), 9);
    },
  },
  {
    rpc: 'GetStatement',
    method: 'GET',
    template: '/v1/billing/statements/{month}',
    path: () => `/v1/billing/statements/${new Date().toISOString().slice(0, 7)}`,
    expect: everyWorkspace,
    check: async (response, ws, as, world) => {
      expect(response.json).toMatchObject({
        month: new Date().toISOString().slice(0, 7),
        currency: 'USD',
        closing_balance_usd: expect.stringMatching(decimal),
      });
      const balance = await world.callAs(ws, as, 'GET', '/v1/billing/balance');
      expect(Number(response.json.closing_balance_usd)).toBeCloseTo(Number(balance.json.balance_usd), 9);
    },
  },
  topupStart('CreateCheckout', '/v1/billing/checkout'),
  topupStart('CreateTopup', '/v1/billing/topup'),
  {
    rpc: 'ListTopups',
    method: 'GET',
    template: '/v1/billing/topups',
    path: () => '/v1/billing/topups?limit=100',
    expect: everyWorkspace,
    check: async (response, ws, as, world) => {
      expect(response.json).toMatchObject({ data: expect.any(Array), has_more: false });
      // A top-up started in this workspace now: listed for every member, never for the outsider.
      const started = await world.callAs(ws, 'owner', 'POST', '/v1/billing/topup', { amount_usd: '5.00', idempotency_key: freshIdempotencyKey() });
      expect(started.status, started.text).toBe(201);
      const listed = await topupIds(world, ws, as);
      if (as === 'outsider') {
        for (const checkoutId of await topupIds(world, ws, 'owner')) expect(listed).not.toContain(checkoutId);
      } else {
        expect(listed).toContain(started.json.checkout_id);
      }
    },
  },
  // The audit log (docs/api/audit.md): owners and admins read their workspace's records (audit.read); the outsider its own workspace's.
  {
    rpc: 'ListAuditEvents',
    method: 'GET',
    template: '/v1/audit-events',
    path: () => '/v1/audit-events?limit=100',
    expect: { owner: 200, admin: 200, developer: 403, outsider: 200 },
    check: (response, ws, as) => {
      if (response.status !== 200) return;
      const records: { workspace_id: string }[] = response.json.data;
      expect(response.json).toMatchObject({ data: expect.any(Array), has_more: expect.any(Boolean) });
      // Only the records of the workspace of the call: the organization's, or the outsider's own.
      if (as === 'outsider') for (const record of records) expect(record.workspace_id).not.toBe(ws.orgId);
      else for (const record of records) expect(record.workspace_id).toBe(ws.orgId);
    },
  },
  // Auto top-up (docs/api/billing.md#auto-top-up): owners and admins read and change the settings
  // (billing.manage); the outsider reads and sets its own workspace's.
  {
    rpc: 'GetAutoTopup',
    method: 'GET',
    template: '/v1/billing/auto-topup',
    path: () => '/v1/billing/auto-topup',
    expect: { owner: 200, admin: 200, developer: 403, outsider: 200 },
    check: (response) => {
      if (response.status === 200) {
        expect(response.json).toMatchObject({ enabled: false, charged_this_month_usd: expect.stringMatching(decimal), consecutive_failures: 0 });
      }
    },
  },
  {
    rpc: 'UpdateAutoTopup',
    method: 'PUT',
    template: '/v1/billing/auto-topup',
    path: () => '/v1/billing/auto-topup',
    // Saved switched off: no payment method is needed for that.
    body: () => ({ enabled: false, threshold_usd: '5.00', amount_usd: '20.00', monthly_limit_usd: '100.00' }),
    expect: { owner: 200, admin: 200, developer: 403, outsider: 200 },
    mutates: true,
    subject: () => '/v1/billing/auto-topup',
    check: async (response, ws, as, world) => {
      if (response.status !== 200) return;
      expect(response.json).toMatchObject({ enabled: false, threshold_usd: '5.00', amount_usd: '20.00', monthly_limit_usd: '100.00' });
      const read = await world.callAs(ws, as, 'GET', '/v1/billing/auto-topup');
      expect(read.json).toMatchObject({ threshold_usd: '5.00' });
    },
  },
  // docs/api/billing.md#payment-methods: every member lists the saved cards; only owners and admins save or remove one.
  {
    rpc: 'CreatePaymentMethodSetup',
    method: 'POST',
    template: '/v1/billing/payment-methods/setup',
    path: () => '/v1/billing/payment-methods/setup',
    body: () => ({}),
    // The outsider starts one in its own workspace.
    expect: { owner: 201, admin: 201, developer: 403, outsider: 201 },
    mutates: true,
    subject: () => '/v1/billing/payment-methods',
    check: (response) => {
      if (response.status !== 201) return;
      expect(response.json).toMatchObject({
        setup_id: expect.stringMatching(/^pms_/),
        setup_url: expect.stringContaining('/v1/billing/sandbox/setup/'),
        expires_at: expect.any(String),
      });
    },
  },
  {
    rpc: 'ListPaymentMethods',
    method: 'GET',
    template: '/v1/billing/payment-methods',
    path: () => '/v1/billing/payment-methods',
    expect: everyWorkspace,
    check: (response) => {
      expect(response.json).toMatchObject({ data: expect.any(Array) });
    },
  },
  {
    rpc: 'DeletePaymentMethod',
    method: 'DELETE',
    template: '/v1/billing/payment-methods/{payment_method_id}',
    // No workspace of the walk has a saved card: the managers get past the role check to 404, the developer not.
    path: () => '/v1/billing/payment-methods/pm_0000000000000000000000',
    expect: { owner: 404, admin: 404, developer: 403, outsider: 404 },
    notFoundCode: 'payment_method_not_found',
    mutates: true,
    subject: () => '/v1/billing/payment-methods',
  },
  // docs/api/keys.md#workspace-budgets: every member reads the workspace's budgets; owners and admins change them (billing.manage).
  {
    rpc: 'GetWorkspaceSpendLimits',
    method: 'GET',
    template: '/v1/billing/spend-limits',
    path: () => '/v1/billing/spend-limits',
    expect: everyWorkspace,
    check: (response, _ws, as) => {
      expect(response.json).toEqual({ spend_limits: expect.any(Array) });
      // The walk sets budgets in workspaces of their own only (and in the outsider's personal one).
      if (as !== 'outsider') expect(response.json.spend_limits).toEqual([]);
    },
  },
  {
    rpc: 'UpdateWorkspaceSpendLimits',
    method: 'PUT',
    template: '/v1/billing/spend-limits',
    path: () => '/v1/billing/spend-limits',
    body: () => ({ spend_limits: [{ period: 'week', amount_usd: '100.00' }] }),
    // The outsider sets its own workspace's.
    expect: { owner: 200, admin: 200, developer: 403, outsider: 200 },
    mutates: true,
    subject: () => '/v1/billing/spend-limits',
    check: async (response, ws, as, world) => {
      if (response.status !== 200) return;
      expect(response.json).toEqual({
        spend_limits: [
          {
            period: 'week',
            amount_usd: '100.00',
            spend_usd: expect.stringMatching(decimal),
            remaining_usd: expect.stringMatching(decimal),
            resets_at: expect.any(String),
          },
        ],
      });
      // Read back: the same budget (its spend may have grown meanwhile: the walk's usage settles in the background).
      const [saved] = (await world.callAs(ws, as, 'GET', '/v1/billing/spend-limits')).json.spend_limits;
      const [put] = response.json.spend_limits;
      expect(saved).toEqual({ ...put, spend_usd: expect.stringMatching(decimal), remaining_usd: expect.stringMatching(decimal) });
    },
  },
  // --- conversations, messages, feedback ----------------------------------------------------
  // docs/conventions.md#roles: every member reads and writes the workspace's conversations, messages and feedback.
  // The outsider acts in its own personal workspace: it creates and lists conversations there
  // (201, 200, never this workspace's), and this workspace's conversation or generation is one it
  // cannot see (404, never 403).
  {
    rpc: 'CreateConversation',
    method: 'POST',
    template: '/v1/conversations',
    path: () => '/v1/conversations',
    body: (_ws, as) => ({ title: `Made by ${as}`, metadata: { by: as } }),
    expect: { owner: 201, admin: 201, developer: 201, outsider: 201 },
    check: async (response, ws, as, world) => {
      expect(response.json).toMatchObject({ conversation_id: expect.stringMatching(/^conv_/), title: `Made by ${as}`, metadata: { by: as } });
      // The conversation belongs to the workspace the caller acted in, and only to it.
      const path = `/v1/conversations/${response.json.conversation_id}`;
      expect((await world.callAs(ws, as, 'GET', path)).status).toBe(200);
      expect((await world.callAs(ws, 'owner', 'GET', path)).status).toBe(as === 'outsider' ? 404 : 200);
    },
  },
  {
    rpc: 'ListConversations',
    method: 'GET',
    template: '/v1/conversations',
    path: () => '/v1/conversations?limit=100',
    // The outsider lists the conversations of its own workspace.
    expect: everyWorkspace,
    check: async (response, ws, as, world) => {
      expect(response.json).toMatchObject({ data: expect.any(Array), has_more: false, next_cursor: null });
      const ids = response.json.data.map((conversation: { conversation_id: string }) => conversation.conversation_id);
      if (as !== 'outsider') {
        expect(ids).toContain(ws.conversationId);
        return;
      }
      expect(ids).not.toContain(ws.conversationId);
      expect(response.text).not.toContain(ws.name);
      const inWorkspace = await world.callAs(ws, 'owner', 'GET', '/v1/conversations?limit=100');
      for (const conversation of inWorkspace.json.data) expect(ids).not.toContain(conversation.conversation_id);
    },
  },
  {
    rpc: 'GetConversation',
    method: 'GET',
    template: '/v1/conversations/{conversation_id}',
    path: conversationPath,
    expect: everyMember,
    notFoundCode: 'conversation_not_found',
    check: (response, ws) => {
      if (response.status === 200) expect(response.json).toMatchObject({ conversation_id: ws.conversationId, metadata: { workspace: ws.name } });
    },
  },
  {
    rpc: 'UpdateConversation',
    method: 'PATCH',
    template: '/v1/conversations/{conversation_id}',
    path: conversationPath,
    body: (_ws, as) => ({ title: `Renamed by ${as}` }),
    expect: everyMember,
    notFoundCode: 'conversation_not_found',
    subject: conversationPath,
    check: (response, ws, as) => {
      // The title changes; the metadata stays.
      if (response.status === 200)
        expect(response.json).toMatchObject({ conversation_id: ws.conversationId, title: `Renamed by ${as}`, metadata: { workspace: ws.name } });
    },
  },
  {
    rpc: 'DeleteConversation',
    method: 'DELETE',
    template: '/v1/conversations/{conversation_id}',
    path: conversationPath,
    expect: { owner: 204, admin: 204, developer: 204, outsider: 404 },
    notFoundCode: 'conversation_not_found',
    mutates: true,
    subject: conversationPath,
    check: async (response, ws, _as, world) => {
      if (response.status !== 204) return;
      // Gone with its messages, for every member.
      expect((await world.callAs(ws, 'owner', 'GET', conversationPath(ws))).status).toBe(404);
      expect((await world.callAs(ws, 'owner', 'GET', `${conversationPath(ws)}/messages`)).status).toBe(404);
    },
  },
  {
    rpc: 'CreateMessage',
    method: 'POST',
    template: '/v1/conversations/{conversation_id}/messages',
    path: (ws) => `${conversationPath(ws)}/messages`,
    body: (_ws, as) => ({ role: 'user', content: `Hello from ${as}` }),
    expect: { owner: 201, admin: 201, developer: 201, outsider: 404 },
    notFoundCode: 'conversation_not_found',
    // A refused append leaves the messages as they were.
    subject: (ws) => `${conversationPath(ws)}/messages?limit=100`,
    check: async (response, ws, as, world) => {
      if (response.status !== 201) return;
      expect(response.json).toMatchObject({
        message_id: expect.stringMatching(/^msg_/),
        conversation_id: ws.conversationId,
        role: 'user',
        content: `Hello from ${as}`,
      });
      const listed = await world.callAs(ws, 'owner', 'GET', `${conversationPath(ws)}/messages?order=desc&limit=1`);
      expect(listed.json.data).toEqual([response.json]);
    },
  },
  {
    rpc: 'ListMessages',
    method: 'GET',
    template: '/v1/conversations/{conversation_id}/messages',
    path: (ws) => `${conversationPath(ws)}/messages?limit=100`,
    expect: everyMember,
    notFoundCode: 'conversation_not_found',
    check: (response, ws) => {
      if (response.status === 200)
        expect(response.json.data[0]).toMatchObject({ conversation_id: ws.conversationId, role: 'user', content: `Welcome to ${ws.name}` });
    },
  },
  {
    rpc: 'RecordFeedback',
    method: 'POST',
    template: '/v1/feedback',
    path: () => '/v1/feedback',
    body: (ws, as) => ({ generation_id: ws.generationId, rating: as === 'admin' ? -1 : 1, tags: [as] }),
    // One rating per workspace and generation: the owner's (the first caller) is new, each
    // further member's replaces it. The outsider cannot see the generation.
    expect: { owner: 201, admin: 200, developer: 200, outsider: 404 },
    scope: 'inference',
    // After the members' ratings: the inference key's replaces them.
    asKey: { status: 200 },
    notFoundCode: 'generation_not_found',
    // A refused rating leaves the workspace's feedback as it was.
    subject: () => '/v1/feedback/summary',
    check: async (response, ws, as, world) => {
      if (response.status >= 300) return;
      expect(response.json).toMatchObject({
        feedback_id: expect.stringMatching(/^fb_/),
        generation_id: ws.generationId,
        rating: as === 'admin' ? -1 : 1,
        tags: [as],
        model: 'gpt-4o-mini',
      });
      const first = firstFeedback.get(ws.orgId) ?? response.json.feedback_id;
      firstFeedback.set(ws.orgId, first);
      expect(response.json.feedback_id).toBe(first);
      const summary = await world.callAs(ws, 'owner', 'GET', '/v1/feedback/summary');
      expect(summary.json).toMatchObject({ total: 1, by_tag: { [as]: { total: 1 } }, by_model: { 'gpt-4o-mini': { total: 1 } } });
    },
  },
  {
    rpc: 'GetFeedbackSummary',
    method: 'GET',
    template: '/v1/feedback/summary',
    path: () => '/v1/feedback/summary',
    // The outsider reads the summary of its own workspace, where nothing was rated.
    expect: everyWorkspace,
    check: async (response, ws, as, world) => {
      expect(response.json).toMatchObject({ days: 30, total: expect.any(Number), by_tag: expect.any(Object), by_model: expect.any(Object) });
      if (as === 'outsider') {
        expect(response.json).toEqual({ days: 30, total: 0, thumbs_up: 0, thumbs_down: 0, by_tag: {}, by_model: {} });
        return;
      }
      expect(response.json).toEqual((await world.callAs(ws, 'owner', 'GET', '/v1/feedback/summary')).json);
    },
  },
  // --- webhooks: owners and admins only (docs/conventions.md#roles), in the workspace of the path ---------------
  {
    rpc: 'CreateWebhook',
    method: 'POST',
    template: '/v1/workspaces/{workspace_id}/webhooks',
    path: (ws) => webhooksPath(ws),
    body: (_ws, as) => ({ url: `https://hooks.invalid/${as}`, events: ['agent.completed'] }),
    expect: { owner: 201, admin: 201, developer: 403, outsider: 404 },
    mutates: true,
    subject: (ws) => `${webhooksPath(ws)}?limit=100`,
    check: (response, ws, as) => {
      if (response.status === 201)
        expect(response.json).toMatchObject({ workspace_id: ws.orgId, url: `https://hooks.invalid/${as}`, secret: expect.stringMatching(/^whsec_/) });
    },
  },
  {
    rpc: 'ListWebhooks',
    method: 'GET',
    template: '/v1/workspaces/{workspace_id}/webhooks',
    path: (ws) => `${webhooksPath(ws)}?limit=100`,
    expect: managersOnly,
    check: (response, ws) => {
      if (response.status === 200) expect(response.json.data.map((w: { webhook_id: string }) => w.webhook_id)).toContain(ws.webhookId);
    },
  },
  {
    rpc: 'GetWebhook',
    method: 'GET',
    template: '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}',
    path: webhookPath,
    expect: managersOnly,
    check: (response, ws) => {
      if (response.status === 200) expect(response.json).toMatchObject({ webhook_id: ws.webhookId, workspace_id: ws.orgId });
    },
  },
  {
    rpc: 'UpdateWebhook',
    method: 'PATCH',
    template: '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}',
    path: webhookPath,
    body: (_ws, as) => ({ description: `changed by ${as}` }),
    expect: managersOnly,
    mutates: true,
    subject: webhookPath,
    check: (response, _ws, as) => {
      if (response.status === 200) expect(response.json.description).toBe(`changed by ${as}`);
    },
  },
  {
    rpc: 'DeleteWebhook',
    method: 'DELETE',
    template: '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}',
    path: webhookPath,
    expect: { owner: 204, admin: 204, developer: 403, outsider: 404 },
    mutates: true,
    subject: webhookPath,
  },
  {
    rpc: 'RotateWebhookSecret',
    method: 'POST',
    template: '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/rotate-secret',
    path: (ws) => `${webhookPath(ws)}/rotate-secret`,
    expect: managersOnly,
    mutates: true,
    subject: webhookPath,
    check: (response) => {
      if (response.status === 200) expect(response.json.secret).toMatch(/^whsec_/);
    },
  },
  {
    rpc: 'TestWebhook',
    method: 'POST',
    template: '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/test',
    path: (ws) => `${webhookPath(ws)}/test`,
    expect: { owner: 202, admin: 202, developer: 403, outsider: 404 },
    mutates: true,
    subject: webhookPath,
    check: (response, ws) => {
      if (response.status === 202) expect(response.json).toMatchObject({ webhook_id: ws.webhookId, event_type: 'webhook.test' });
    },
  },
  {
    rpc: 'ListDeliveries',
    method: 'GET',
    template: '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries',
    path: (ws) => `${webhookPath(ws)}/deliveries`,
    expect: managersOnly,
    check: (response, ws) => {
      if (response.status === 200) expect(response.json.data.map((d: { delivery_id: string }) => d.delivery_id)).toContain(ws.deliveryId);
    },
  },
  {
    rpc: 'GetDelivery',
    method: 'GET',
    template: '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries/{delivery_id}',
    path: deliveryPath,
    expect: managersOnly,
    check: (response, ws) => {
      if (response.status === 200) expect(response.json).toMatchObject({ delivery_id: ws.deliveryId, webhook_id: ws.webhookId });
    },
  },
  {
    rpc: 'RedeliverDelivery',
    method: 'POST',
    template: '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver',
    path: (ws) => `${deliveryPath(ws)}/redeliver`,
    expect: { owner: 202, admin: 202, developer: 403, outsider: 404 },
    mutates: true,
    subject: webhookPath,
  },
  {
    rpc: 'RecoverDeliveries',
    method: 'POST',
    template: '/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/recover',
    path: (ws) => `${webhookPath(ws)}/recover`,
    body: () => ({ since: new Date(Date.now() - 3_600_000).toISOString() }),
    expect: { owner: 200, admin: 200, developer: 403, outsider: 404 },
    mutates: true,
    subject: webhookPath,
  },
  {
    rpc: 'ListWebhookEventTypes',
    method: 'GET',
    template: '/v1/webhook-event-types',
    path: () => '/v1/webhook-event-types',
    // Not workspace-scoped: the same catalog for every signed-in principal (docs/webhooks.md#the-event-catalog).
    expect: { owner: 200, admin: 200, developer: 200, outsider: 200 },
    check: (response) => expect(response.json.data.map((entry: { type: string }) => entry.type)).toContain('key.created'),
  },
];

/**
 * Services whose routes act on the caller's own account, not in a workspace: the permission
 * table does not apply to them (they are covered by the account tests).
 */
export const accountScopedServices = ['switchboard.identity.v1.AuthService', 'switchboard.identity.v1.AccountService'];

/**
 * Services whose routes are public and capability-based, in no workspace: the permission table
 * does not apply to them. billing's CheckoutService: the sandbox payment page and its completion
 * (the unguessable token in the path is the capability) and the Stripe webhook (the provider's
 * signature is). The walk only checks that they need no credentials and give nothing for a
 * bogus capability; the billing tests cover them.
 */
export const publicServices = ['switchboard.billing.v1.CheckoutService'];

let generationCounter = 0;

/**
 * Registers users and builds workspaces through REST, reading invitation tokens from the mailbox;
 * a workspace's generation is recorded through `dataPlane` (billing's UsageService, called as the
 * data plane), which building workspaces needs.
 */
export class World {
  private readonly users = new Map<string, User>();

  constructor(
    private readonly call: Call,
    private readonly mailbox: Mailbox,
    private readonly dataPlane?: Client<typeof UsageService>,
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

  /** A call by `as`: members act in the organization; the outsider in its own workspace, which is a real one. */
  callAs(ws: Workspace, as: Caller, method: string, path: string, body?: unknown): Promise<ApiResponse> {
    const user = ws.users[principalOf(as)];
    const workspaceId = as === 'outsider' ? user.personalWorkspaceId : ws.orgId;
    return this.call(method, path, { token: user.token, headers: { 'x-workspace-id': workspaceId }, body });
  }

  /** A call with the owner's key that has `scope` only: it acts as the owner, in the key's workspace (no X-Workspace-Id). */
  callAsKey(ws: Workspace, scope: KeyScopeName, method: string, path: string, body?: unknown): Promise<ApiResponse> {
    return this.call(method, path, { token: ws.scopedKeys[scope].fullKey, body });
  }

  /** A call without credentials, as a browser or a payment provider makes it. */
  anonymous(method: string, path: string, body?: unknown): Promise<ApiResponse> {
    return this.call(method, path, { body });
  }

  /** Starts a top-up of `amountUsd` in the workspace as its owner and pays it on the sandbox page. */
  async paidTopup(ws: Workspace, amountUsd: string): Promise<void> {
    const started = await this.callAs(ws, 'owner', 'POST', '/v1/billing/topup', { amount_usd: amountUsd, idempotency_key: freshIdempotencyKey() });
    expect(started.status, started.text).toBe(201);
    const paid = await this.anonymous('POST', `${new URL(started.json.checkout_url).pathname}/complete`);
    expect(paid.status, paid.text).toBe(200);
    expect(paid.json).toMatchObject({ checkout_id: started.json.checkout_id, status: 'completed' });
  }

  /** Creates a key as `user` in `workspaceId`, with the initial alert webhook, and returns its key_id. */
  private async key(user: User, workspaceId: string, name: string): Promise<string> {
    const options = { token: user.token, headers: { 'x-workspace-id': workspaceId } };
    const created = await this.call('POST', '/v1/keys', { ...options, body: { name } });
    expect(created.status, created.text).toBe(201);
    const keyId: string = created.json.key.key_id;
    const alerted = await this.call('PUT', `/v1/keys/${keyId}/alert-webhook`, { ...options, body: { url: initialAlertUrl } });
    expect(alerted.status, alerted.text).toBe(200);
    return keyId;
  }

  /** A fresh organization of the shared users (owner, admin, developer, target), a key of each, plus a pending invitation. */
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
    // Named after the organization, so that a 404 shows no trace of the key either.
    const keyIds = await Promise.all(members.map((member) => this.key(users[member], orgId, `${member}'s key in ${name}`)));
    const keys = Object.fromEntries(members.map((member, i) => [member, keyIds[i]])) as Record<Member, string>;
    const pending = await this.invite(users.owner, orgId, name, freshAddress(), 'developer');
    const scoped = await Promise.all(walkedScopes.map((scope) => this.scopedKey(users.owner, orgId, name, scope)));
    const scopedKeys = Object.fromEntries(walkedScopes.map((scope, i) => [scope, scoped[i]])) as Record<KeyScopeName, ScopedKey>;
    return {
      orgId,
      name,
      users,
      keys,
      pendingInvitationId: pending.invitationId,
      pendingInvitationToken: pending.token,
      conversationId: await this.conversation(users.target, orgId, name),
      generationId: await this.generation(orgId, scopedKeys.inference.keyId),
      ...(await this.webhook(users.owner, orgId, name)),
      scopedKeys,
    };
  }

  /** A key of `owner` in `workspaceId` with `scope` only, named after it and the organization. */
  private async scopedKey(owner: User, workspaceId: string, name: string, scope: KeyScopeName): Promise<ScopedKey> {
    const created = await this.call('POST', '/v1/keys', {
      token: owner.token,
      headers: { 'x-workspace-id': workspaceId },
      body: { name: `the ${scope} key in ${name}`, scopes: [scope] },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.json.key.scopes).toEqual([scope]);
    return { keyId: created.json.key.key_id, fullKey: created.json.full_key };
  }

  /**
   * A webhook of the organization with a test delivery, once its first attempt failed (nothing
   * resolves under .invalid): from then on the endpoint's record stays as it is until a call changes it.
   */
  private async webhook(owner: User, orgId: string, name: string): Promise<{ webhookId: string; deliveryId: string }> {
    const base = `/v1/workspaces/${orgId}/webhooks`;
    const created = await this.call('POST', base, { token: owner.token, body: { url: 'https://hooks.invalid/walk', description: `Hooks of ${name}` } });
    expect(created.status, created.text).toBe(201);
    const webhookId: string = created.json.webhook_id;
    const tested = await this.call('POST', `${base}/${webhookId}/test`, { token: owner.token });
    expect(tested.status, tested.text).toBe(202);
    await eventually(async () => {
      const endpoint = await this.call('GET', `${base}/${webhookId}`, { token: owner.token });
      return endpoint.json.failing_since ? true : undefined;
    }, "the first attempt of the walk's test delivery");
    return { webhookId, deliveryId: tested.json.delivery_id };
  }

  /** A conversation created by `user` in `workspaceId`, named after the organization (so a 404 shows no trace of it), with one message. */
  private async conversation(user: User, workspaceId: string, name: string): Promise<string> {
    const options = { token: user.token, headers: { 'x-workspace-id': workspaceId } };
    const created = await this.call('POST', '/v1/conversations', { ...options, body: { title: `Plans of ${name}`, metadata: { workspace: name } } });
    expect(created.status, created.text).toBe(201);
    const conversationId: string = created.json.conversation_id;
    const message = await this.call('POST', `/v1/conversations/${conversationId}/messages`, {
      ...options,
      body: { role: 'user', content: `Welcome to ${name}` },
    });
    expect(message.status, message.text).toBe(201);
    return conversationId;
  }

  /** A generation of `workspaceId` served for `keyId`, recorded as the data plane records one. */
  private async generation(workspaceId: string, keyId: string): Promise<string> {
    if (!this.dataPlane) throw new Error("World.workspace() records a generation: construct the World with billing's UsageService client");
    generationCounter += 1;
    const generationId = `gen_walk_${Date.now().toString(36)}_${generationCounter}`;
    await this.dataPlane.recordUsage({
      generationId,
      keyId,
      workspaceId,
      model: 'service/fast',
      routedModel: 'gpt-4o-mini',
      inputTokens: 10n,
      outputTokens: 5n,
    });
    return generationId;
  }
}
