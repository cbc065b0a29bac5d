/** The roles of an organization, highest first (identity.proto: owner, admin, developer). */
const ranks: Record<string, number> = { owner: 3, admin: 2, developer: 1 };

/**
 * Whether a member with `role` may change or remove a member with `target`: the API lets the
 * owner and admins act on members at or below their own role, never on the owner.
 */
export function outranksOrEquals(role: string, target: string): boolean {
  return target !== 'owner' && (ranks[role] ?? 0) >= (ranks[target] ?? Number.POSITIVE_INFINITY);
}

/** The roles `role` may give by invitation or role change: at or below its own, never `owner`. */
export function assignableRoles(role: string): { value: string; label: string }[] {
  return ['admin', 'developer'].filter((candidate) => outranksOrEquals(role, candidate)).map((value) => ({ value, label: roleLabels[value] }));
}

export const roleLabels: Record<string, string> = {
  owner: 'Owner',
  admin: 'Admin',
  developer: 'Developer',
};
