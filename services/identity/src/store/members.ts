import { type Db, isUniqueViolation, microsOf, type PageQuery, pageClause } from '@switchboard/runtime/sql';

// Memberships and roles.

export async function insertMembership(db: Db, membership: { orgId: string; userId: string; role: string }): Promise<void> {
  await db('memberships').insert({ org_id: membership.orgId, user_id: membership.userId, role: membership.role });
}

export interface ResolvedMembership {
  org_id: string;
  role: string;
  deactivated: boolean;
}

/**
 * The user's membership in `workspaceId` (their personal workspace when empty), in one query on
 * the users and memberships primary keys.
 */
export async function findMembership(db: Db, userId: string, workspaceId: string): Promise<ResolvedMembership | undefined> {
  const result = await db.raw<{ rows: ResolvedMembership[] }>(
    `SELECT m.org_id, m.role, (u.deactivated_at IS NOT NULL) AS deactivated
       FROM users u
       JOIN memberships m ON m.user_id = u.id AND m.org_id = COALESCE(NULLIF(?, ''), u.personal_workspace_id)
      WHERE u.id = ?`,
    [workspaceId, userId],
  );
  return result.rows[0];
}

export interface MemberRow {
  user_id: string;
  org_id: string;
  email: string;
  full_name: string | null;
  role: string;
  joined_at: Date;
  cursor_micros: string;
}

const memberSelect = `SELECT m.user_id, m.org_id, u.email, u.full_name, m.role, m.created_at AS joined_at, ${microsOf('m.created_at')} AS cursor_micros
       FROM memberships m
       JOIN users u ON u.id = m.user_id`;

export async function findMember(db: Db, orgId: string, userId: string): Promise<MemberRow | undefined> {
  const result = await db.raw<{ rows: MemberRow[] }>(`${memberSelect} WHERE m.org_id = ? AND m.user_id = ?`, [orgId, userId]);
  return result.rows[0];
}

export async function findMemberByEmail(db: Db, orgId: string, email: string): Promise<MemberRow | undefined> {
  const result = await db.raw<{ rows: MemberRow[] }>(`${memberSelect} WHERE m.org_id = ? AND u.email = ?`, [orgId, email]);
  return result.rows[0];
}

/** Members of the organization, most recently joined first; `limit + 1` rows. */
export async function listMembers(db: Db, orgId: string, page: PageQuery): Promise<MemberRow[]> {
  const { cursor, bindings } = pageClause(page, 'm.created_at', 'm.user_id', [orgId]);
  const result = await db.raw<{ rows: MemberRow[] }>(
    `${memberSelect} WHERE m.org_id = ? ${cursor} ORDER BY m.created_at DESC, m.user_id DESC LIMIT ?`,
    bindings,
  );
  return result.rows;
}

/** A second owner was refused by the unique partial index memberships_one_owner. */
export class SecondOwnerError extends Error {}

/** Sets a member's role; false when the membership no longer exists. */
export async function updateMemberRole(db: Db, orgId: string, userId: string, role: string): Promise<boolean> {
  try {
    return (await db('memberships').where({ org_id: orgId, user_id: userId }).update({ role })) === 1;
  } catch (err) {
    if (isUniqueViolation(err, 'memberships_one_owner')) throw new SecondOwnerError('the organization has an owner already');
    throw err;
  }
}

export async function deleteMembership(db: Db, orgId: string, userId: string): Promise<boolean> {
  return (await db('memberships').where({ org_id: orgId, user_id: userId }).delete()) === 1;
}

/** Ends every membership of the organization but `userId`'s; the ids of the users removed. */
export async function deleteOtherMemberships(db: Db, orgId: string, userId: string): Promise<string[]> {
  const rows: Array<{ user_id: string }> = await db('memberships').where({ org_id: orgId }).whereNot({ user_id: userId }).delete().returning('user_id');
  return rows.map((row) => row.user_id);
}
