import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, type ConnectRouter, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { AccountService, AuditService, AuthService, OrganizationService } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { userCaller, workspaceCaller } from '@switchboard/runtime/caller';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { callScopeOf, changedWorkspaceHeader, clientIpOf, requestIdOf, revokedSessionsHeader, userAgentOf } from '@switchboard/runtime/server';
import type { AccountSettings } from './account-settings.js';
import { type Accounts, normalizeEmail, normalizeFullName, toAccount } from './accounts.js';
import type { AuditLog } from './audit-log.js';
import type { DataExports } from './data-exports.js';
import type { Deactivations } from './deactivation.js';
import type { EmailVerifications } from './email-verification.js';
import type { Invitations } from './invitations.js';
import type { LoginChallenges } from './login-challenge.js';
import type { Members } from './members.js';
import type { Organizations } from './organizations.js';
import type { Ownership } from './ownership.js';
import type { PasswordResets } from './password-reset.js';
import { assertAcceptablePassword } from './passwords.js';
import type { LogoutScope, Sessions } from './sessions.js';
import type { SigningKeys } from './signing-keys.js';
import type { TwoFactor } from './two-factor.js';

/**
 * The RPC surface of the identity service: validation and translation only; the work happens in
 * the domain modules. Each service object implements every RPC of its proto (ServiceImpl), so a
 * new RPC does not compile until it has a handler.
 */

export interface IdentityHandlers {
  auditLog: AuditLog;
  accounts: Accounts;
  signingKeys: SigningKeys;
  sessions: Sessions;
  challenges: LoginChallenges;
  verifications: EmailVerifications;
  passwordResets: PasswordResets;
  settings: AccountSettings;
  twoFactor: TwoFactor;
  deactivations: Deactivations;
  organizations: Organizations;
  members: Members;
  invitations: Invitations;
  ownership: Ownership;
  dataExports: DataExports;
}

/** Tells the gateway that cached roles of the organization are stale. */
function announceChangedWorkspace(ctx: HandlerContext, orgId: string): void {
  ctx.responseHeader.set(changedWorkspaceHeader, orgId);
}

/** Lets the gateway drop the revoked sessions at once (see revokedSessionsHeader). */
function announceRevoked(ctx: HandlerContext, ids: string[]): void {
  // Bounded header; larger sets reach the gateway through the session.revoked event.
  if (ids.length > 0 && ids.length <= 200) ctx.responseHeader.set(revokedSessionsHeader, ids.join(','));
}

/** The normalized address, or undefined for what is no address at all (it just gets no mail: the answer stays the same). */
function emailOrUndefined(raw: string): string | undefined {
  try {
    return normalizeEmail(raw);
  } catch {
    return undefined;
  }
}

const isLogoutScope = (scope: string): scope is LogoutScope => scope === 'local' || scope === 'others' || scope === 'global';

export function registerRoutes(router: ConnectRouter, handlers: IdentityHandlers): void {
  const { accounts, signingKeys, sessions } = handlers;

  const auth: ServiceImpl<typeof AuthService> = {
    // 202 whatever the address (docs/api/identity.md#password-reset-and-email-verification), as a reset request.
    async resendVerificationEmail(req, ctx) {
      if (req.email.trim() === '') throw invalidArgument('email', 'An email address is required.');
      await handlers.verifications.requestResend(emailOrUndefined(req.email), { ip: clientIpOf(ctx), requestId: requestIdOf(ctx) });
      return {};
    },

    async register(req, ctx) {
      const email = normalizeEmail(req.email);
      assertAcceptablePassword(req.password, email);
      const fullName = normalizeFullName(req.fullName);
      const { user, session } = await accounts.register({ email, password: req.password, fullName }, callScopeOf(ctx));
      return { user: toAccount(user), session };
    },

    async login(req, ctx) {
      if (req.email.trim() === '') throw invalidArgument('email', 'An email address is required.');
      if (req.password === '') throw invalidArgument('password', 'A password is required.');
      // No syntax check: a malformed address is just an unknown one (same 401, same timing).
      const result = await accounts.login({ email: req.email.trim().toLowerCase(), password: req.password, ...callScopeOf(ctx) });
      return 'session' in result ? { session: result.session } : { mfaRequired: true, mfaToken: result.mfaToken };
    },

    async loginSecondFactor(req, ctx) {
      const session = await handlers.challenges.complete({
        mfaToken: req.mfaToken,
        code: req.code,
        recoveryCode: req.recoveryCode,
        ip: clientIpOf(ctx),
        userAgent: userAgentOf(ctx),
        requestId: requestIdOf(ctx),
      });
      return { session };
    },

    async refresh(req, ctx) {
      if (req.refreshToken === '') throw invalidArgument('refresh_token', 'refresh_token is required.');
      return { session: await sessions.refresh(req.refreshToken, requestIdOf(ctx)) };
    },

    async logout(req, ctx) {
      const { userId, sessionId } = userCaller(ctx);
      const scope = req.scope ?? 'local';
      if (!isLogoutScope(scope)) throw invalidArgument('scope', 'scope must be local, others or global.');
      announceRevoked(
        ctx,
        await sessions.logout({ userId, sessionId, scope, refreshToken: req.refreshToken, requestId: requestIdOf(ctx), ip: clientIpOf(ctx) }),
      );
      return {};
    },

    // 202 whatever the address (docs/api/identity.md#password-reset-and-email-verification): one that is not an address at all just gets no mail.
    async requestPasswordReset(req, ctx) {
      if (req.email.trim() === '') throw invalidArgument('email', 'An email address is required.');
      const email = emailOrUndefined(req.email);
      if (email) handlers.passwordResets.request(email, requestIdOf(ctx));
      return {};
    },

    async confirmPasswordReset(req, ctx) {
      if (req.token === '') throw invalidArgument('token', 'token is required.');
      if (req.newPassword === '') throw invalidArgument('new_password', 'new_password is required.');
      announceRevoked(ctx, await handlers.passwordResets.confirm(req.token, req.newPassword, callScopeOf(ctx)));
      return {};
    },

    async verifyEmail(req, ctx) {
      if (req.token === '') throw invalidArgument('token', 'token is required.');
      await handlers.verifications.verify(req.token, { requestId: requestIdOf(ctx) });
      return {};
    },

    async getJwks() {
      return { keys: await signingKeys.publicKeys() };
    },

    // Only the gateway may call it: its access option in identity.proto.
    async listRevokedSessions(req) {
      const rows = await sessions.revokedSince(req.revokedSince ? timestampDate(req.revokedSince) : undefined);
      return { sessions: rows.map((row) => ({ sessionId: row.id, revokedAt: timestampFromDate(row.revoked_at) })) };
    },
  };

  const account: ServiceImpl<typeof AccountService> = {
    // The data export (docs/api/identity.md#data-export): built in the background, mailed as a link.
    requestDataExport: (_req, ctx) => handlers.dataExports.request(userCaller(ctx)),
    getDataExport: (req, ctx) => handlers.dataExports.download(userCaller(ctx).userId, req.exportId, ctx),
    async getAccount(_req, ctx) {
      return toAccount(await accounts.get(userCaller(ctx).userId));
    },

    async updateAccount(req, ctx) {
      const user = await accounts.get(userCaller(ctx).userId);
      return toAccount(await handlers.settings.updateProfile(user, req.fullName));
    },

    async changePassword(req, ctx) {
      const caller = userCaller(ctx);
      const user = await accounts.get(caller.userId);
      const revoked = await handlers.settings.changePassword(
        user,
        { currentPassword: req.currentPassword, newPassword: req.newPassword, currentSessionId: caller.sessionId },
        callScopeOf(ctx),
      );
      announceRevoked(ctx, revoked);
      return {};
    },

    async getTwoFactorStatus(_req, ctx) {
      const status = await handlers.twoFactor.status(userCaller(ctx).userId);
      return {
        enabled: status.enabled,
        enabledAt: status.enabledAt ? timestampFromDate(status.enabledAt) : undefined,
        recoveryCodesRemaining: status.recoveryCodesRemaining,
      };
    },

    async enrollTwoFactor(req, ctx) {
      if (req.password === '') throw invalidArgument('password', 'password is required: changing the second factor needs re-authentication.');
      return handlers.settings.enrollTwoFactor(await accounts.get(userCaller(ctx).userId), req.password, callScopeOf(ctx));
    },

    async activateTwoFactor(req, ctx) {
      const user = await accounts.get(userCaller(ctx).userId);
      return { recoveryCodes: await handlers.settings.activateTwoFactor(user, req.code, callScopeOf(ctx)) };
    },

    async disableTwoFactor(req, ctx) {
      const user = await accounts.get(userCaller(ctx).userId);
      await handlers.settings.disableTwoFactor(user, { code: req.code, password: req.password }, callScopeOf(ctx));
      return {};
    },

    async regenerateRecoveryCodes(req, ctx) {
      const user = await accounts.get(userCaller(ctx).userId);
      return { recoveryCodes: await handlers.settings.regenerateRecoveryCodes(user, req.code, callScopeOf(ctx)) };
    },

    async deactivateAccount(req, ctx) {
      const user = await accounts.get(userCaller(ctx).userId);
      const result = await handlers.deactivations.deactivate(user, { password: req.password, code: req.code }, callScopeOf(ctx));
      announceRevoked(ctx, result.revoked);
      return { deactivatedAt: timestampFromDate(result.deactivatedAt), eraseAfter: timestampFromDate(result.eraseAfter) };
    },

    async listSessions(req, ctx) {
      const caller = userCaller(ctx);
      return sessions.list(caller.userId, caller.sessionId, { limit: req.limit, after: req.after });
    },

    async revokeSession(req, ctx) {
      if (req.sessionId === '') throw invalidArgument('session_id', 'session_id is required.');
      announceRevoked(ctx, await sessions.revokeOne(userCaller(ctx).userId, req.sessionId, { requestId: requestIdOf(ctx), ip: clientIpOf(ctx) }));
      return {};
    },
  };

  const { organizations: orgs, members, invitations, ownership } = handlers;
  const organizations: ServiceImpl<typeof OrganizationService> = {
    // Organizations, members, invitations (issue 4): each RPC checks the caller's membership of the
    // organization in the path (404), then the permission table (403), then the input.
    async createOrganization(req, ctx) {
      return { organization: await orgs.create(userCaller(ctx), req.name, requestIdOf(ctx)) };
    },
    async listOrganizations(req, ctx) {
      return orgs.list(userCaller(ctx), { limit: req.limit, after: req.after });
    },
    async getOrganization(req, ctx) {
      return orgs.get(userCaller(ctx), req.orgId);
    },
    async deleteOrganization(req, ctx) {
      await orgs.delete(userCaller(ctx), req.orgId, requestIdOf(ctx));
      announceChangedWorkspace(ctx, req.orgId);
      return {};
    },
    async createInvitation(req, ctx) {
      return invitations.create(userCaller(ctx), req.orgId, { email: req.email, role: req.role }, requestIdOf(ctx));
    },
    async listInvitations(req, ctx) {
      return invitations.list(userCaller(ctx), req.orgId, { limit: req.limit, after: req.after });
    },
    async revokeInvitation(req, ctx) {
      await invitations.revoke(userCaller(ctx), req.orgId, req.invitationId, requestIdOf(ctx));
      return {};
    },
    async acceptInvitation(req, ctx) {
      return invitations.accept(userCaller(ctx), req.token, requestIdOf(ctx));
    },
    async listMembers(req, ctx) {
      return members.list(userCaller(ctx), req.orgId, { limit: req.limit, after: req.after });
    },
    async updateMember(req, ctx) {
      const member = await members.updateRole(userCaller(ctx), req.orgId, req.userId, req.role, requestIdOf(ctx));
      announceChangedWorkspace(ctx, req.orgId);
      return member;
    },
    async removeMember(req, ctx) {
      await members.remove(userCaller(ctx), req.orgId, req.userId, requestIdOf(ctx));
      announceChangedWorkspace(ctx, req.orgId);
      return {};
    },
    async transferOwnership(req, ctx) {
      const organization = await ownership.transfer(userCaller(ctx), req.orgId, req.newOwnerUserId, requestIdOf(ctx));
      announceChangedWorkspace(ctx, req.orgId);
      return organization;
    },

    // Only the gateway may call it (it answers for any user): its access option in identity.proto.
    async resolveWorkspace(req) {
      if (req.userId === '') throw invalidArgument('user_id', 'user_id is required.');
      const membership = await handlers.organizations.resolveWorkspace(req.userId, req.workspaceId);
      if (!membership) throw apiError(Code.NotFound, 'workspace_not_found', 'The workspace does not exist or you are not a member of it.');
      return { workspaceId: membership.org_id, role: membership.role, deactivated: membership.deactivated };
    },
  };

  // The audit log (docs/api/audit.md); `audit.read` (owners, admins) is its access rule.
  const auditService: ServiceImpl<typeof AuditService> = {
    listAuditEvents: (req, ctx) => handlers.auditLog.list(workspaceCaller(ctx), req),
  };

  router.service(AuthService, auth);
  router.service(AuditService, auditService);
  router.service(AccountService, account);
  router.service(OrganizationService, organizations);
}
