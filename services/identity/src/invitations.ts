import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import { OrganizationMemberAddedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { InvitationSchema, ListInvitationsResponseSchema, MemberSchema } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { type AuditTrail, callerAuditRecord } from '@switchboard/runtime/audit';
import type { Caller } from '@switchboard/runtime/caller';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { newId, newToken } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import { authorize, forbidden, mayGrant } from '@switchboard/runtime/policy';
import { sha256Hex } from '@switchboard/runtime/secrets';
import { clientIpOf } from '@switchboard/runtime/server';
import { toMember, visibleOrganization } from './access.js';
import { normalizeEmail } from './accounts.js';
import type { ActionLimits } from './action-limits.js';
import { parseRole } from './members.js';
import type { AccountMail } from './notifications.js';
import {
  findInvitation,
  findInvitationByTokenHash,
  type InvitationRow,
  insertInvitation,
  listInvitations,
  markInvitationAccepted,
  markInvitationRevoked,
  revokePendingInvitationsFor,
} from './store/invitations.js';
import { findMember, findMemberByEmail, insertMembership } from './store/members.js';
import { lockOrganization } from './store/organizations.js';
import { findUserById } from './store/users.js';
import type { EventWriter } from './workspaces.js';

/**
 * Invitations (docs/api/identity.md#invitations): a single-use token (256 bits, stored as its SHA-256) bound to an email
 * address and a role below owner, mailed to the address, valid for INVITATION_TTL (7 days).
 * Owners and admins list and revoke them; the invited person accepts with the token while
 * signed in with an account of the same email.
 */

export const defaultInvitationTtl = '7d';

export const invalidToken = (message: string) => apiError(Code.InvalidArgument, 'invalid_token', message, { field: 'token' });

export function toInvitation(row: InvitationRow): MessageInitShape<typeof InvitationSchema> {
  return {
    invitationId: row.id,
    orgId: row.org_id,
    email: row.email,
    role: row.role,
    status: row.status,
    invitedBy: row.invited_by,
    createdAt: timestampFromDate(row.created_at),
    expiresAt: timestampFromDate(row.expires_at),
  };
}

export interface InvitationsDeps {
  db: Knex;
  log: Logger;
  mail: AccountMail;
  recordEvent: EventWriter;
  /** Lifetime of an invitation in milliseconds (INVITATION_TTL). */
  ttlMs: number;
  limits: ActionLimits;
  audit: AuditTrail;
}

export class Invitations {
  constructor(private readonly deps: InvitationsDeps) {}

  /**
   * Invites `email` with `role`. Checks: organization (404) → table row (403) → input (400:
   * email, role; `owner` is never invited) → the granter's own role (403) → already a member
   * (409). A new invitation revokes the address's pending ones, so one token is live per address.
   */
  async create(caller: Caller, orgId: string, input: { email: string; role: string }, requestId?: string): Promise<MessageInitShape<typeof InvitationSchema>> {
    const { db, log } = this.deps;
    // Each invitation mails a stranger. Counted before the transaction, not in it: the limit
    // writes on its own connection, and one taken while the transaction holds another could
    // wait for the pool forever under load.
    await this.deps.limits.take('invitation', { userId: caller.userId, ip: clientIpOf(caller.ctx) });
    const token = newToken();
    const { invitation, organizationName, inviter } = await db.transaction(async (trx) => {
      const organization = await visibleOrganization(trx, caller, orgId, true);
      const actorRole = authorize(caller.ctx, 'members.invite', { role: organization.role, workspaceId: orgId });
      const email = normalizeEmail(input.email);
      const role = parseRole(input.role);
      if (role === 'owner') {
        throw invalidArgument('role', 'The owner role cannot be invited; invite as admin or developer, then transfer ownership.');
      }
      if (!mayGrant(actorRole, role)) throw forbidden(`The ${actorRole} role cannot invite with the ${role} role.`);
      if (await findMemberByEmail(trx, orgId, email)) {
        throw apiError(Code.AlreadyExists, 'already_a_member', 'This address belongs to a member of the organization already.', { field: 'email' });
      }
      await revokePendingInvitationsFor(trx, orgId, email, caller.userId);
      const row = await insertInvitation(trx, {
        id: newId('inv'),
        orgId,
        email,
        role,
        tokenHash: sha256Hex(token),
        invitedBy: caller.userId,
        ttlMs: this.deps.ttlMs,
      });
      await this.deps.audit.record(
        trx,
        callerAuditRecord(caller, 'member.invited', { type: 'invitation', id: row.id }, { workspaceId: orgId, metadata: { role } }),
      );
      const user = await findUserById(trx, caller.userId);
      return { invitation: row, organizationName: organization.name, inviter: user?.full_name ?? user?.email ?? 'A member' };
    });
    log.info({ org_id: orgId, invitation_id: invitation.id, role: invitation.role, by: caller.userId, request_id: requestId }, 'invitation created');
    // After commit; a failure is logged (the invitation can be sent again).
    await this.deps.mail.invitation(
      { id: invitation.id, email: invitation.email, role: invitation.role, expiresAt: invitation.expires_at },
      token,
      organizationName,
      inviter,
    );
    return toInvitation(invitation);
  }

  async list(caller: Caller, orgId: string, input: { limit?: number; after?: string }): Promise<MessageInitShape<typeof ListInvitationsResponseSchema>> {
    const organization = await visibleOrganization(this.deps.db, caller, orgId);
    authorize(caller.ctx, 'invitations.read', { role: organization.role, workspaceId: orgId });
    const limit = parseLimit(input.limit);
    const after = decodeCursor(input.after);
    const rows = await listInvitations(this.deps.db, orgId, { limit, after });
    const page = pageOf(rows, limit, (row) => ({ micros: row.cursor_micros, id: row.id }));
    return { data: page.rows.map(toInvitation), hasMore: page.hasMore, nextCursor: page.nextCursor };
  }

  /** Revokes a pending invitation; revoking a revoked or expired one again is fine; an accepted one is 409. */
  async revoke(caller: Caller, orgId: string, invitationId: string, requestId?: string): Promise<void> {
    const { db, log } = this.deps;
    // Under the organization's lock, like an accept: a concurrent accept lands before or after.
    await db.transaction(async (trx) => {
      const organization = await visibleOrganization(trx, caller, orgId, true);
      authorize(caller.ctx, 'invitations.revoke', { role: organization.role, workspaceId: orgId });
      const invitation = await findInvitation(trx, orgId, invitationId);
      if (!invitation) throw apiError(Code.NotFound, 'invitation_not_found', 'No such invitation in this organization.');
      if (invitation.status === 'accepted') {
        throw apiError(Code.AlreadyExists, 'invitation_accepted', 'This invitation has been accepted already; remove the member instead.');
      }
      await markInvitationRevoked(trx, invitationId, caller.userId);
    });
    log.info({ org_id: orgId, invitation_id: invitationId, by: caller.userId, request_id: requestId }, 'invitation revoked');
  }

  /**
   * Joins the organization with the mailed token. An unknown token is 400 invalid_token; a token
   * for another address is 403 (the state of someone else's invitation is not told); a revoked,
   * expired or used one is 400 invalid_token saying which. The token row is locked, so a token
   * is accepted at most once also under concurrent attempts.
   */
  async accept(caller: Caller, rawToken: string, requestId?: string): Promise<MessageInitShape<typeof MemberSchema>> {
    const { db, recordEvent, log } = this.deps;
    const token = rawToken.trim();
    if (token === '') throw invalidArgument('token', 'The invitation token is required.');
    const member = await db.transaction(async (trx) => {
      const tokenHash = sha256Hex(token);
      // Lock order as every membership change: the organization row first, then the invitation.
      const found = await findInvitationByTokenHash(trx, tokenHash);
      if (!found || !(await lockOrganization(trx, found.org_id))) throw invalidToken('The invitation token is not valid.');
      const invitation = await findInvitationByTokenHash(trx, tokenHash, true);
      if (!invitation) throw invalidToken('The invitation token is not valid.');
      const user = await findUserById(trx, caller.userId);
      if (!user || user.email !== invitation.email) {
        throw apiError(
          Code.PermissionDenied,
          'invitation_email_mismatch',
          'This invitation was sent to another email address; sign in with the invited account to accept it.',
        );
      }
      if (invitation.status === 'accepted') throw invalidToken('This invitation has been used already.');
      if (invitation.status === 'revoked') throw invalidToken('This invitation has been revoked.');
      if (invitation.status === 'expired') throw invalidToken('This invitation has expired; ask for a new one.');
      if (await findMember(trx, invitation.org_id, caller.userId)) {
        throw apiError(Code.AlreadyExists, 'already_a_member', 'You are a member of this organization already.');
      }
      await insertMembership(trx, { orgId: invitation.org_id, userId: caller.userId, role: invitation.role });
      await markInvitationAccepted(trx, invitation.id, caller.userId);
      await recordEvent(trx, OrganizationMemberAddedSchema, {
        workspaceId: invitation.org_id,
        data: { orgId: invitation.org_id, userId: caller.userId, role: invitation.role, invitationId: invitation.id },
        requestId,
      });
      await this.deps.audit.record(
        trx,
        callerAuditRecord(
          caller,
          'member.joined',
          { type: 'member', id: caller.userId },
          { workspaceId: invitation.org_id, metadata: { role: invitation.role, invitation_id: invitation.id } },
        ),
      );
      return (await findMember(trx, invitation.org_id, caller.userId))!;
    });
    log.info({ org_id: member.org_id, user_id: caller.userId, role: member.role, request_id: requestId }, 'invitation accepted');
    return toMember(member);
  }
}
