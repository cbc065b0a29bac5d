import { Code, type ConnectRouter, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { callerOf, requestIdOf } from '@switchboard/runtime/server';
import { AccountService, AuthService, OrganizationService } from '@switchboard/runtime/gen/switchboard/identity/v1/identity_pb';
import { normalizeEmail, normalizeFullName, toAccount, type Accounts } from './accounts.js';
import { assertAcceptablePassword } from './passwords.js';
import type { SigningKeys } from './signing-keys.js';
import { resolveWorkspace } from './workspaces.js';
import { callerFrom } from './access.js';
import type { Invitations } from './invitations.js';
import type { Members } from './members.js';
import type { Organizations } from './organizations.js';
import type { Ownership } from './ownership.js';

/**
 * The RPC surface of the identity service: validation and translation only; the work happens in
 * the domain modules. RPCs left out of these objects answer Unimplemented (connect-es does it).
 */

export interface IdentityHandlers {
  db: Knex;
  accounts: Accounts;
  signingKeys: SigningKeys;
  organizations: Organizations;
  members: Members;
  invitations: Invitations;
  ownership: Ownership;
}

/** The signed-in user a call is made for; 401 when the mesh token names none. */
function principalOf(ctx: HandlerContext): string {
  const { principalId } = callerOf(ctx);
  if (!principalId) throw apiError(Code.Unauthenticated, 'unauthenticated', 'This call needs a signed-in user.');
  return principalId;
}

export function registerRoutes(router: ConnectRouter, handlers: IdentityHandlers): void {
  const { accounts, signingKeys } = handlers;

  const auth: Partial<ServiceImpl<typeof AuthService>> = {
    async register(req, ctx) {
      const email = normalizeEmail(req.email);
      assertAcceptablePassword(req.password, email);
      const fullName = normalizeFullName(req.fullName);
      const { user, session } = await accounts.register({ email, password: req.password, fullName }, requestIdOf(ctx));
      return { user: toAccount(user), session };
    },

    async login(req) {
      if (req.email.trim() === '') throw invalidArgument('email', 'An email address is required.');
      if (req.password === '') throw invalidArgument('password', 'A password is required.');
      // No syntax check: a malformed address is just an unknown one (same 401, same timing).
      const session = await accounts.login({ email: req.email.trim().toLowerCase(), password: req.password });
      return { session };
    },

    async getJwks() {
      return { keys: await signingKeys.publicKeys() };
    },
  };

  const account: Partial<ServiceImpl<typeof AccountService>> = {
    async getAccount(_req, ctx) {
      return toAccount(await accounts.get(principalOf(ctx)));
    },
  };

  const { organizations: orgs, members, invitations, ownership } = handlers;
  const organizations: Partial<ServiceImpl<typeof OrganizationService>> = {
    // Organizations, members, invitations (issue 4): each RPC checks the caller's membership of the
    // organization in the path (404), then the permission table (403), then the input.
    async createOrganization(req, ctx) {
      return { organization: await orgs.create(callerFrom(ctx), req.name, requestIdOf(ctx)) };
    },
    async listOrganizations(req, ctx) {
      return orgs.list(callerFrom(ctx), { limit: req.limit, after: req.after });
    },
    async getOrganization(req, ctx) {
      return orgs.get(callerFrom(ctx), req.orgId);
    },
    async deleteOrganization(req, ctx) {
      await orgs.delete(callerFrom(ctx), req.orgId, requestIdOf(ctx));
      return {};
    },
    async createInvitation(req, ctx) {
      return invitations.create(callerFrom(ctx), req.orgId, { email: req.email, role: req.role }, requestIdOf(ctx));
    },
    async listInvitations(req, ctx) {
      return invitations.list(callerFrom(ctx), req.orgId, { limit: req.limit, after: req.after });
    },
    async revokeInvitation(req, ctx) {
      await invitations.revoke(callerFrom(ctx), req.orgId, req.invitationId, requestIdOf(ctx));
      return {};
    },
    async acceptInvitation(req, ctx) {
      return invitations.accept(callerFrom(ctx), req.token, requestIdOf(ctx));
    },
    async listMembers(req, ctx) {
      return members.list(callerFrom(ctx), req.orgId, { limit: req.limit, after: req.after });
    },
    async updateMember(req, ctx) {
      return members.updateRole(callerFrom(ctx), req.orgId, req.userId, req.role, requestIdOf(ctx));
    },
    async removeMember(req, ctx) {
      await members.remove(callerFrom(ctx), req.orgId, req.userId, requestIdOf(ctx));
      return {};
    },
    async transferOwnership(req, ctx) {
      return ownership.transfer(callerFrom(ctx), req.orgId, req.newOwnerUserId, requestIdOf(ctx));
    },

    // Only the gateway may call it (it answers for any user): rpcRules in runtime/src/policy.ts.
    async resolveWorkspace(req) {
      if (req.userId === '') throw invalidArgument('user_id', 'user_id is required.');
      const membership = await resolveWorkspace(handlers.db, req.userId, req.workspaceId);
      if (!membership) throw apiError(Code.NotFound, 'workspace_not_found', 'The workspace does not exist or you are not a member of it.');
      return { workspaceId: membership.org_id, role: membership.role, deactivated: membership.deactivated };
    },
  };

  router.service(AuthService, auth);
  router.service(AccountService, account);
  router.service(OrganizationService, organizations);
}
