import type { MessageInitShape } from '@bufbuild/protobuf';
import { OrganizationDeletedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { ListOrganizationsResponseSchema, OrganizationSchema } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { type AuditTrail, callerAuditRecord } from '@switchboard/runtime/audit';
import { type Caller, keyWorkspaceOf } from '@switchboard/runtime/caller';
import type { Knex } from '@switchboard/runtime/db';
import { invalidArgument, unprocessable } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import { authorize } from '@switchboard/runtime/policy';
import { clientIpOf } from '@switchboard/runtime/server';
import { toOrganization, visibleOrganization } from './access.js';
import type { ActionLimits } from './action-limits.js';
import type { ResolvedMembership } from './store/members.js';
import { deleteOrganization, findOrganizationOfMember, insertOrganization, listOrganizationsOfUser } from './store/organizations.js';
import { findUserById } from './store/users.js';
import { addOwner, type EventWriter, resolveWorkspace } from './workspaces.js';

/** Organizations (docs/api/identity.md#organization-endpoints): create, list the caller's, read one, delete. */

const maxNameLength = 200;

/** Trimmed, 1..200 characters, no control characters; 400 on field `name`. */
export function normalizeOrganizationName(raw: string): string {
  const name = raw.trim();
  const length = Array.from(name).length;
  if (length === 0) throw invalidArgument('name', 'An organization name is required.');
  if (length > maxNameLength) throw invalidArgument('name', `The organization name must be at most ${maxNameLength} characters long.`);
  if (/\p{Cc}/u.test(name)) throw invalidArgument('name', 'The organization name must not contain control characters.');
  return name;
}

export interface OrganizationsDeps {
  db: Knex;
  log: Logger;
  recordEvent: EventWriter;
  limits: ActionLimits;
  audit: AuditTrail;
}

export class Organizations {
  constructor(private readonly deps: OrganizationsDeps) {}

  /**
   * The workspace a user request acts in (the personal one when `workspaceId` is empty) and the
   * user's role there, for the gateway; undefined when the user is not a member.
   */
  resolveWorkspace(userId: string, workspaceId: string): Promise<ResolvedMembership | undefined> {
    return resolveWorkspace(this.deps.db, userId, workspaceId);
  }

  /** A new organization with the caller as owner (organization.created, organization.member.added). */
  async create(caller: Caller, rawName: string, requestId?: string): Promise<MessageInitShape<typeof OrganizationSchema>> {
    const name = normalizeOrganizationName(rawName);
    const { db, recordEvent, log, limits } = this.deps;
    await limits.take('organization_create', { userId: caller.userId, ip: clientIpOf(caller.ctx) });
    const orgId = newId('org');
    const row = await db.transaction(async (trx) => {
      await insertOrganization(trx, { id: orgId, name, personal: false });
      await addOwner(trx, recordEvent, { orgId, userId: caller.userId, personal: false, requestId });
      return (await findOrganizationOfMember(trx, orgId, caller.userId))!;
    });
    log.info({ org_id: orgId, user_id: caller.userId, request_id: requestId }, 'organization created');
    return toOrganization(row);
  }

  /** The caller's organizations (personal one included), most recently joined first; an API key sees its own workspace only. */
  async list(caller: Caller, input: { limit?: number; after?: string }): Promise<MessageInitShape<typeof ListOrganizationsResponseSchema>> {
    const limit = parseLimit(input.limit);
    const after = decodeCursor(input.after);
    const keyWorkspaceId = keyWorkspaceOf(caller);
    if (keyWorkspaceId !== undefined) {
      const own = after ? undefined : await findOrganizationOfMember(this.deps.db, keyWorkspaceId, caller.userId);
      return { data: own ? [toOrganization(own)] : [], hasMore: false };
    }
    const rows = await listOrganizationsOfUser(this.deps.db, caller.userId, { limit, after });
    const page = pageOf(rows, limit, (row) => ({ micros: row.cursor_micros, id: row.id }));
    return { data: page.rows.map((row) => toOrganization(row)), hasMore: page.hasMore, nextCursor: page.nextCursor };
  }

  async get(caller: Caller, orgId: string): Promise<MessageInitShape<typeof OrganizationSchema>> {
    const organization = await visibleOrganization(this.deps.db, caller, orgId);
    authorize(caller.ctx, 'organization.read', { role: organization.role, workspaceId: orgId });
    return toOrganization(organization);
  }

  /**
   * Deletes an organization (owner only; never a personal workspace). Its memberships and
   * invitations go with it; organization.deleted tells keys (revoke its keys) and webhooks
   * (disable its endpoints).
   */
  async delete(caller: Caller, orgId: string, requestId?: string): Promise<void> {
    const { db, recordEvent, log } = this.deps;
    await db.transaction(async (trx) => {
      const organization = await visibleOrganization(trx, caller, orgId, true);
      authorize(caller.ctx, 'organization.delete', { role: organization.role, workspaceId: orgId });
      if (organization.personal) {
        throw unprocessable('personal_workspace', 'A personal workspace cannot be deleted; it goes with the account.');
      }
      await deleteOrganization(trx, orgId);
      await recordEvent(trx, OrganizationDeletedSchema, { workspaceId: orgId, data: { orgId, deletedBy: caller.userId }, requestId });
      // The organization's workspace is gone: the record goes to the deleting owner's personal one.
      const owner = await findUserById(trx, caller.userId);
      await this.deps.audit.record(
        trx,
        callerAuditRecord(
          caller,
          'organization.deleted',
          { type: 'organization', id: orgId },
          { workspaceId: owner?.personal_workspace_id ?? '', metadata: { name: organization.name } },
        ),
      );
    });
    log.info({ org_id: orgId, user_id: caller.userId, request_id: requestId }, 'organization deleted');
  }
}
