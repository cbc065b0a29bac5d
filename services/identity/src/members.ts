import type { MessageInitShape } from '@bufbuild/protobuf';
import { Code } from '@connectrpc/connect';
import { OrganizationMemberRemovedSchema, OrganizationMemberRoleChangedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { ListMembersResponseSchema, MemberSchema } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { type AuditTrail, callerAuditRecord } from '@switchboard/runtime/audit';
import type { Caller } from '@switchboard/runtime/caller';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import type { Logger } from '@switchboard/runtime/log';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import { authorize, forbidden, isRole, mayGrant, mayManageMember, type Role } from '@switchboard/runtime/policy';
import { toMember, visibleOrganization } from './access.js';
import { deleteMembership, findMember, listMembers, updateMemberRole } from './store/members.js';
import type { EventWriter } from './workspaces.js';

/**
 * Members of an organization: list, change a role, remove (or leave). Every change locks the
 * organization row first (visibleOrganization with lock), so concurrent changes of one
 * organization are serialized and each decides on fresh roles.
 */

export const memberNotFound = () => apiError(Code.NotFound, 'member_not_found', 'No such member in this organization.');

/** A role named in a request: one of owner, admin, developer, else 400 on `field`. */
export function parseRole(raw: string, field = 'role'): Role {
  const role = raw.trim();
  if (role === '') throw invalidArgument(field, 'A role is required: admin or developer.');
  if (!isRole(role)) throw invalidArgument(field, `Unknown role "${role}"; use admin or developer.`);
  return role;
}

export interface MembersDeps {
  db: Knex;
  log: Logger;
  recordEvent: EventWriter;
  audit: AuditTrail;
}

export class Members {
  constructor(private readonly deps: MembersDeps) {}

  async list(caller: Caller, orgId: string, input: { limit?: number; after?: string }): Promise<MessageInitShape<typeof ListMembersResponseSchema>> {
    const organization = await visibleOrganization(this.deps.db, caller, orgId);
    authorize(caller.ctx, 'members.read', { role: organization.role, workspaceId: orgId });
    const limit = parseLimit(input.limit);
    const after = decodeCursor(input.after);
    const rows = await listMembers(this.deps.db, orgId, { limit, after });
    const page = pageOf(rows, limit, (row) => ({ micros: row.cursor_micros, id: row.user_id }));
    return { data: page.rows.map(toMember), hasMore: page.hasMore, nextCursor: page.nextCursor };
  }

  /**
   * Changes a member's role. Checks: the organization (404) → the table row (403 for developers)
   * → the member (404) → acting on the owner (403 for an admin, 409 for the owner itself) → the
   * new role (400; `owner` only by transfer; at or below the granter's own).
   */
  async updateRole(caller: Caller, orgId: string, userId: string, rawRole: string, requestId?: string): Promise<MessageInitShape<typeof MemberSchema>> {
    const { db, recordEvent, audit } = this.deps;
    const result = await db.transaction(async (trx) => {
      const organization = await visibleOrganization(trx, caller, orgId, true);
      const actorRole = authorize(caller.ctx, 'members.update_role', { role: organization.role, workspaceId: orgId });
      const member = await findMember(trx, orgId, userId);
      if (!member) throw memberNotFound();
      const targetRole = member.role as Role;
      if (targetRole === 'owner') {
        if (member.user_id === caller.userId) {
          throw apiError(Code.AlreadyExists, 'owner_cannot_be_demoted', 'The owner cannot change its own role; transfer ownership to another member first.');
        }
        throw forbidden(`The ${actorRole} role cannot change the owner's role; only a transfer of ownership by the owner moves it.`);
      }
      if (!mayManageMember(actorRole, targetRole)) throw forbidden(`The ${actorRole} role cannot change the role of a member who is ${targetRole}.`);
      const role = parseRole(rawRole);
      if (role === 'owner') {
        throw invalidArgument('role', 'Ownership cannot be granted by a role change; use POST /v1/organizations/{org_id}/transfer-ownership.');
      }
      if (!mayGrant(actorRole, role)) throw forbidden(`The ${actorRole} role cannot grant the ${role} role.`);
      if (role === targetRole) return { member, changed: false };
      await updateMemberRole(trx, orgId, userId, role);
      await recordEvent(trx, OrganizationMemberRoleChangedSchema, {
        workspaceId: orgId,
        data: { orgId, userId, role, previousRole: targetRole },
        requestId,
      });
      await audit.record(
        trx,
        callerAuditRecord(
          caller,
          'member.role_changed',
          { type: 'member', id: userId },
          { workspaceId: orgId, subjectUserId: userId, metadata: { role, previous_role: targetRole } },
        ),
      );
      return { member: { ...member, role }, changed: true };
    });
    return toMember(result.member);
  }

  /**
   * Removes a member, or lets a member leave (removing oneself needs no manager role). The owner
   * can neither be removed (403 for an admin) nor leave (409: transfer first).
   * organization.member.removed tells keys to revoke the member's keys in the organization.
   */
  async remove(caller: Caller, orgId: string, userId: string, requestId?: string): Promise<void> {
    const { db, recordEvent, log, audit } = this.deps;
    await db.transaction(async (trx) => {
      const organization = await visibleOrganization(trx, caller, orgId, true);
      const leaving = userId === caller.userId;
      const actorRole = authorize(caller.ctx, leaving ? 'members.leave' : 'members.remove', { role: organization.role, workspaceId: orgId });
      const member = await findMember(trx, orgId, userId);
      if (!member) throw memberNotFound();
      if (member.role === 'owner') {
        if (leaving) {
          throw apiError(Code.AlreadyExists, 'owner_cannot_leave', 'The owner cannot leave or be removed; transfer ownership to another member first.');
        }
        throw forbidden(`The ${actorRole} role cannot remove the owner.`);
      }
      if (!leaving && !mayManageMember(actorRole, member.role as Role)) {
        throw forbidden(`The ${actorRole} role cannot remove a member who is ${member.role}.`);
      }
      await deleteMembership(trx, orgId, userId);
      await recordEvent(trx, OrganizationMemberRemovedSchema, {
        workspaceId: orgId,
        data: { orgId, userId, removedBy: caller.userId },
        requestId,
      });
      await audit.record(
        trx,
        callerAuditRecord(
          caller,
          'member.removed',
          { type: 'member', id: userId },
          { workspaceId: orgId, subjectUserId: userId, metadata: { role: member.role, left: leaving } },
        ),
      );
    });
    log.info({ org_id: orgId, user_id: userId, by: caller.userId, request_id: requestId }, 'member removed');
  }
}
