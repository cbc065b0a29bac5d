import type { MessageInitShape } from '@bufbuild/protobuf';
import { Code } from '@connectrpc/connect';
import { OrganizationMemberRoleChangedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { OrganizationSchema } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { type AuditTrail, callerAuditRecord } from '@switchboard/runtime/audit';
import type { Caller } from '@switchboard/runtime/caller';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument, unprocessable } from '@switchboard/runtime/errors';
import type { Logger } from '@switchboard/runtime/log';
import { authorize } from '@switchboard/runtime/policy';
import { toOrganization, visibleOrganization } from './access.js';
import { findMember, SecondOwnerError, updateMemberRole } from './store/members.js';
import type { EventWriter } from './workspaces.js';

/**
 * Transfer of ownership. Exactly one owner at every moment, also under concurrent transfers:
 * the organization row is locked (FOR UPDATE) before the caller's role is read, so a second
 * transfer waits for the first and then finds its caller is no longer the owner (403); the
 * old owner is demoted before the new one is promoted, inside one transaction, and the unique
 * partial index memberships_one_owner refuses any second owner whatever happens.
 */

export interface OwnershipDeps {
  db: Knex;
  log: Logger;
  recordEvent: EventWriter;
  audit: AuditTrail;
}

export class Ownership {
  constructor(private readonly deps: OwnershipDeps) {}

  async transfer(caller: Caller, orgId: string, newOwnerUserId: string, requestId?: string): Promise<MessageInitShape<typeof OrganizationSchema>> {
    const { db, recordEvent, audit } = this.deps;
    const result = await db
      .transaction(async (trx) => {
        const organization = await visibleOrganization(trx, caller, orgId, true);
        authorize(caller.ctx, 'organization.transfer_ownership', { role: organization.role, workspaceId: orgId });
        if (organization.personal) {
          // The account's default workspace must stay its own (it could otherwise be removed from it).
          throw unprocessable('personal_workspace', 'A personal workspace stays with its account; create an organization to share ownership.');
        }
        const target = newOwnerUserId.trim();
        if (target === '') throw invalidArgument('new_owner_user_id', 'new_owner_user_id is required: the user id of a member.');
        if (target === caller.userId) return { organization, role: 'owner', changed: false };
        const member = await findMember(trx, orgId, target);
        if (!member) {
          throw unprocessable('not_a_member', 'The new owner must already be a member of the organization; invite them first.', { field: 'new_owner_user_id' });
        }
        await updateMemberRole(trx, orgId, caller.userId, 'admin');
        if (!(await updateMemberRole(trx, orgId, target, 'owner'))) {
          throw unprocessable('not_a_member', 'The new owner is no longer a member of the organization.', { field: 'new_owner_user_id' });
        }
        await recordEvent(trx, OrganizationMemberRoleChangedSchema, {
          workspaceId: orgId,
          data: { orgId, userId: caller.userId, role: 'admin', previousRole: 'owner' },
          requestId,
        });
        await recordEvent(trx, OrganizationMemberRoleChangedSchema, {
          workspaceId: orgId,
          data: { orgId, userId: target, role: 'owner', previousRole: member.role },
          requestId,
        });
        await audit.record(
          trx,
          callerAuditRecord(
            caller,
            'organization.ownership_transferred',
            { type: 'member', id: target },
            { workspaceId: orgId, subjectUserId: target, metadata: { previous_role: member.role } },
          ),
        );
        return { organization, role: 'admin', changed: true };
      })
      .catch((err: unknown) => {
        // Unreachable while the organization lock serializes transfers; the index is the last word.
        if (err instanceof SecondOwnerError)
          throw apiError(Code.Aborted, 'conflict', 'Ownership changed at the same time; read the organization again and retry.');
        throw err;
      });
    return toOrganization(result.organization, result.role);
  }
}
