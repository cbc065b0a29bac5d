/** Generated at build time by permissions-plugin.ts from the OpenAPI document's `x-switchboard-access`. */
declare module 'virtual:permissions' {
  const table: Record<string, { roles: string[]; ownRoles: string[] }>;
  export default table;
}
