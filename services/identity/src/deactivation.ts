import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import { OrganizationDeletedSchema, OrganizationMemberRemovedSchema, UserDeactivatedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import type { Logger } from '@switchboard/runtime/log';
import type { CallScope } from '@switchboard/runtime/server';
import type { AccountMail } from './notifications.js';
import type { Reauthentication } from './reauthentication.js';
import type { Sessions } from './sessions.js';
import { revokeAllPendingInvitations } from './store/invitations.js';
import { deleteMembership, deleteOtherMemberships } from './store/members.js';
import { deleteOrganization, findMembershipsWithCounts } from './store/organizations.js';
import { usePasswordResets } from './store/password-resets.js';
import { lockUser, markDeactivated, type UserRow } from './store/users.js';
import type { EventWriter } from './workspaces.js';

/**
 * Self-service deactivation (GDPR, docs/api/identity.md#deactivation-and-erasure): the password (and a current code when 2FA is on)
 * again; then, in one transaction, organizations where the user is the only member are deleted
 * and memberships in other organizations end. The personal workspace goes with the account
 * whoever else it holds (it cannot be transferred, so it never asks for a transfer): its other
 * members are removed and its pending invitations revoked, and its row stays until erasure
 * (billing records point at it). Then every session is revoked, and `user.deactivated` tells the keys
 * service to revoke the user's keys. Sign-in is refused from then on; the erasure job
 * pseudonymizes the account after ACCOUNT_ERASE_AFTER (30 days).
 */

export const defaultEraseAfterMs = 30 * 24 * 3600 * 1000;

export interface DeactivationsDeps {
  db: Knex;
  log: Logger;
  sessions: Sessions;
  reauth: Reauthentication;
  mail: AccountMail;
  recordEvent: EventWriter;
  clock?: Clock;
  eraseAfterMs?: number;
}

export class Deactivations {
  constructor(private readonly deps: DeactivationsDeps) {}

  async deactivate(
    user: UserRow,
    input: { password: string; code?: string },
    scope: CallScope,
  ): Promise<{ deactivatedAt: Date; eraseAfter: Date; revoked: string[] }> {
    const { db, sessions, reauth, mail, recordEvent, log } = this.deps;
    const { requestId } = scope;
    if (input.password === '') throw invalidArgument('password', 'Your password is required to deactivate the account.');
    await reauth.password(user, input.password, scope);
    if (user.two_factor_enabled) {
      if (!input.code?.trim()) throw invalidArgument('code', 'Two-factor authentication is on: send a current code too.');
      await reauth.code(user, input.code, scope);
    }
    const deactivatedAt = (this.deps.clock ?? systemClock)();
    const eraseAfter = new Date(deactivatedAt.getTime() + (this.deps.eraseAfterMs ?? defaultEraseAfterMs));
    const revoked = await db.transaction(async (trx) => {
      const locked = await lockUser(trx, user.id);
      if (!locked || locked.deactivated_at !== null)
        throw apiError(Code.FailedPrecondition, 'account_deactivated', 'The account is deactivated already.', { httpStatus: 409 });
      const memberships = await findMembershipsWithCounts(trx, user.id);
      const owned = memberships.filter((m) => m.role === 'owner' && m.member_count > 1 && !m.personal).map((m) => m.org_id);
      if (owned.length > 0) {
        throw apiError(Code.FailedPrecondition, 'ownership_transfer_required', 'Transfer the ownership of your organizations with other members first.', {
          httpStatus: 409,
          metadata: { org_ids: owned },
        });
      }
      for (const membership of memberships) {
        if (membership.personal && membership.role === 'owner') {
          await revokeAllPendingInvitations(trx, membership.org_id, user.id);
          for (const removed of await deleteOtherMemberships(trx, membership.org_id, user.id)) {
            await recordEvent(trx, OrganizationMemberRemovedSchema, {
              workspaceId: membership.org_id,
              data: { orgId: membership.org_id, userId: removed, removedBy: user.id },
              requestId,
            });
          }
        }
        if (membership.member_count === 1 || (membership.personal && membership.role === 'owner')) {
          if (!membership.personal) await deleteOrganization(trx, membership.org_id);
          await recordEvent(trx, OrganizationDeletedSchema, {
            workspaceId: membership.org_id,
            data: { orgId: membership.org_id },
            requestId,
          });
        } else {
          await deleteMembership(trx, membership.org_id, user.id);
          await recordEvent(trx, OrganizationMemberRemovedSchema, {
            workspaceId: membership.org_id,
            data: { orgId: membership.org_id, userId: user.id },
            requestId,
          });
        }
      }
      await markDeactivated(trx, user.id, deactivatedAt, eraseAfter);
      await usePasswordResets(trx, user.id, deactivatedAt);
      const ids = await sessions.revoke(trx, { userId: user.id, reason: 'deactivation', requestId, ip: scope.ip });
      await recordEvent(trx, UserDeactivatedSchema, {
        data: { userId: user.id, deactivatedAt: timestampFromDate(deactivatedAt), eraseAfter: timestampFromDate(eraseAfter) },
        requestId,
      });
      return ids;
    });
    log.info({ user_id: user.id, request_id: requestId, erase_after: eraseAfter.toISOString() }, 'account deactivated');
    await mail.credentialChanged({ id: user.id, email: user.email, fullName: user.full_name }, 'account_deactivated');
    return { deactivatedAt, eraseAfter, revoked };
  }
}
