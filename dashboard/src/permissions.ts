import table from 'virtual:permissions';

/**
 * Whether `role` may perform `action` (`webhooks.read`, `keys.manage`, … : the names of the
 * API's role × action table); `own` says the object is the caller's (a key they created).
 *
 * The dashboard only hides what the API would refuse: the API decides every call again. The
 * table comes from the OpenAPI document at build time (permissions-plugin.ts); an action it does
 * not name throws, so a misspelt one fails the first time its page renders.
 */
export function can(role: string | undefined, action: string, own = false): boolean {
  const rule = table[action];
  if (!rule) throw new Error(`unknown action ${action}: the API document names ${Object.keys(table).join(', ')}`);
  if (!role) return false;
  return rule.roles.includes(role) || (own && rule.ownRoles.includes(role));
}
