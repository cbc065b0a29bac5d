import { OrganizationCreatedSchema, OrganizationMemberAddedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { Knex } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import type { Db } from '@switchboard/runtime/sql';
import { findMembership, insertMembership, type ResolvedMembership } from './store/members.js';
import { insertOrganization } from './store/organizations.js';

/**
 * Workspaces are organizations (docs/conventions.md#workspaces). Registration creates the personal one; the gateway
 * resolves the workspace and role of every user request here.
 */

import type { EventWriter } from '@switchboard/runtime/service';

export type { EventWriter };

export type Role = 'owner' | 'admin' | 'developer';

const maxOrganizationNameLength = 200;
const personalSuffix = "'s workspace";

/** "<full name or email local part>'s workspace", within the 200-character name limit. */
export function personalWorkspaceName(fullName: string | null, email: string): string {
  const base = fullName ?? email.slice(0, email.lastIndexOf('@'));
  const room = maxOrganizationNameLength - personalSuffix.length;
  return `${Array.from(base).slice(0, room).join('')}${personalSuffix}`;
}

/** Inserts a personal workspace (before its user: the user row points at it). */
export async function insertPersonalWorkspace(trx: Knex.Transaction, name: string): Promise<string> {
  const orgId = newId('org');
  await insertOrganization(trx, { id: orgId, name, personal: true });
  return orgId;
}

/**
 * Makes `userId` the owner of the new workspace `orgId` and writes organization.created and
 * organization.member.added in the same transaction.
 */
export async function addOwner(
  trx: Knex.Transaction,
  recordEvent: EventWriter,
  input: { orgId: string; userId: string; personal: boolean; requestId?: string },
): Promise<void> {
  await insertMembership(trx, { orgId: input.orgId, userId: input.userId, role: 'owner' });
  const { orgId, userId, requestId } = input;
  await recordEvent(trx, OrganizationCreatedSchema, { workspaceId: orgId, data: { orgId, ownerUserId: userId, personal: input.personal }, requestId });
  await recordEvent(trx, OrganizationMemberAddedSchema, { workspaceId: orgId, data: { orgId, userId, role: 'owner' }, requestId });
}

/**
 * The user's membership in `workspaceId` (empty: the personal workspace), or undefined when the
 * user is not a member (or does not exist). One indexed query.
 */
export function resolveWorkspace(db: Db, userId: string, workspaceId: string): Promise<ResolvedMembership | undefined> {
  return findMembership(db, userId, workspaceId);
}
