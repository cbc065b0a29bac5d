import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import type { MemberSchema, OrganizationSchema } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { type Caller, keyWorkspaceOf } from '@switchboard/runtime/caller';
import { errorCatalogue } from '@switchboard/runtime/error-catalogue';
import { apiError } from '@switchboard/runtime/errors';
import type { Db } from '@switchboard/runtime/sql';
import type { MemberRow } from './store/members.js';
import { findOrganizationOfMember, lockOrganization, type MemberOrganizationRow } from './store/organizations.js';

/**
 * Which organizations the caller of an organization RPC may see. For
 * /v1/organizations/{org_id}/… the organization of the PATH counts (not the X-Workspace-Id the
 * gateway resolved): identity checks the caller's membership of it here, from the database, so a
 * role change or a removal applies to these routes at once.
 */

// The gateway's answer for the same organization (runtime/src/error-catalogue.ts), so the two never tell it apart.
export const organizationNotFound = () => apiError(Code.NotFound, errorCatalogue.organizationNotFound.code, errorCatalogue.organizationNotFound.message);

/**
 * The organization `orgId` with the caller's role in it; 404 (never 403) when it does not exist,
 * the caller is not a member, or an API key names another workspace than its own. With `lock`,
 * the organization row stays locked until the transaction ends.
 */
export async function visibleOrganization(db: Db, caller: Caller, orgId: string, lock = false): Promise<MemberOrganizationRow> {
  const keyWorkspaceId = keyWorkspaceOf(caller);
  if (!orgId || (keyWorkspaceId !== undefined && keyWorkspaceId !== orgId)) throw organizationNotFound();
  // Lock first, read after, in two statements: under READ COMMITTED a statement that waited for
  // the lock would re-check only the locked row and return the membership (the role) as it was
  // before the transaction it waited for; the next statement sees that transaction's changes.
  if (lock && !(await lockOrganization(db, orgId))) throw organizationNotFound();
  const organization = await findOrganizationOfMember(db, orgId, caller.userId);
  if (!organization) throw organizationNotFound();
  return organization;
}

export function toOrganization(row: MemberOrganizationRow, role = row.role): MessageInitShape<typeof OrganizationSchema> {
  return { orgId: row.id, name: row.name, createdAt: timestampFromDate(row.created_at), role, personal: row.personal };
}

export function toMember(row: MemberRow): MessageInitShape<typeof MemberSchema> {
  return {
    userId: row.user_id,
    orgId: row.org_id,
    email: row.email,
    fullName: row.full_name ?? undefined,
    role: row.role,
    joinedAt: timestampFromDate(row.joined_at),
  };
}
