import { type Db, microsOf, type PageQuery, pageClause } from '@switchboard/runtime/sql';

// Organizations (workspaces) as their members see them.

export async function insertOrganization(db: Db, organization: { id: string; name: string; personal: boolean }): Promise<{ created_at: Date }> {
  const [row] = await db('organizations').insert(organization).returning(['created_at']);
  return row as { created_at: Date };
}

/** An organization seen by one of its members. */
export interface MemberOrganizationRow {
  id: string;
  name: string;
  personal: boolean;
  created_at: Date;
  role: string;
  /** When the member joined: the list order and cursor. */
  joined_at: Date;
  cursor_micros: string;
}

/**
 * The organization `orgId` with `userId`'s role in it, or undefined when either does not exist
 * or the user is not a member.
 */
export async function findOrganizationOfMember(db: Db, orgId: string, userId: string): Promise<MemberOrganizationRow | undefined> {
  const result = await db.raw<{ rows: MemberOrganizationRow[] }>(
    `SELECT o.id, o.name, o.personal, o.created_at, m.role, m.created_at AS joined_at, ${microsOf('m.created_at')} AS cursor_micros
       FROM organizations o
       JOIN memberships m ON m.org_id = o.id AND m.user_id = ?
      WHERE o.id = ?`,
    [userId, orgId],
  );
  return result.rows[0];
}

/** The user's organizations, most recently joined first; `limit + 1` rows (pageOf cuts). */
export async function listOrganizationsOfUser(db: Db, userId: string, page: PageQuery): Promise<MemberOrganizationRow[]> {
  const { cursor, bindings } = pageClause(page, 'm.created_at', 'm.org_id', [userId]);
  const result = await db.raw<{ rows: MemberOrganizationRow[] }>(
    `SELECT o.id, o.name, o.personal, o.created_at, m.role, m.created_at AS joined_at, ${microsOf('m.created_at')} AS cursor_micros
       FROM memberships m
       JOIN organizations o ON o.id = m.org_id
      WHERE m.user_id = ? ${cursor}
      ORDER BY m.created_at DESC, m.org_id DESC
      LIMIT ?`,
    bindings,
  );
  return result.rows;
}

export interface OrganizationMembershipRow {
  org_id: string;
  role: string;
  personal: boolean;
  member_count: number;
}

/**
 * The user's memberships with each organization's member count. The organizations are locked
 * first (in id order, like every membership change locks its organization), so a concurrent
 * transfer, invitation or removal cannot change them between this read and the caller's writes.
 */
export async function findMembershipsWithCounts(db: Db, userId: string): Promise<OrganizationMembershipRow[]> {
  await db.raw('SELECT o.id FROM organizations o JOIN memberships m ON m.org_id = o.id AND m.user_id = ? ORDER BY o.id FOR UPDATE OF o', [userId]);
  const result = await db.raw<{ rows: Array<OrganizationMembershipRow & { member_count: string }> }>(
    `SELECT m.org_id, m.role, o.personal, (SELECT count(*) FROM memberships x WHERE x.org_id = m.org_id) AS member_count
       FROM memberships m JOIN organizations o ON o.id = m.org_id
      WHERE m.user_id = ?
      ORDER BY m.org_id`,
    [userId],
  );
  return result.rows.map((row) => ({ ...row, member_count: Number(row.member_count) }));
}

/** Deletes the organization; memberships and invitations go with it (ON DELETE CASCADE). */
export async function deleteOrganization(db: Db, orgId: string): Promise<void> {
  await db('organizations').where({ id: orgId }).delete();
}

/**
 * Locks the organization row (FOR UPDATE) until the transaction ends; false when it does not
 * exist. Every change of an organization's members takes this lock first, so the changes of one
 * organization run one after another and each reads (in a later statement) the roles the
 * previous one left.
 */
export async function lockOrganization(db: Db, orgId: string): Promise<boolean> {
  const result = await db.raw<{ rows: unknown[] }>('SELECT id FROM organizations WHERE id = ? FOR UPDATE', [orgId]);
  return result.rows.length === 1;
}
