import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Plugin } from 'vite';

const moduleId = 'virtual:permissions';
const resolvedId = `\0${moduleId}`;

interface AccessExtension {
  actions?: { action: string; roles: string[]; roles_on_own_objects?: string[] }[];
}

/**
 * `virtual:permissions`: the role × action table, read at build time from the OpenAPI document
 * the SDK is generated from (each operation's `x-switchboard-access`), so the dashboard hides
 * exactly the controls the API would refuse, without a copy of the table to keep in step.
 */
export function permissionsPlugin(): Plugin {
  return {
    name: 'switchboard-permissions',
    resolveId: (id) => (id === moduleId ? resolvedId : undefined),
    load(id) {
      if (id !== resolvedId) return undefined;
      const documentPath = createRequire(import.meta.url).resolve('@switchboard/sdk/openapi.json');
      this.addWatchFile(documentPath);
      const document = JSON.parse(readFileSync(documentPath, 'utf8')) as {
        paths: Record<string, Record<string, { 'x-switchboard-access'?: AccessExtension }>>;
      };
      const table: Record<string, { roles: string[]; ownRoles: string[] }> = {};
      for (const operations of Object.values(document.paths)) {
        for (const operation of Object.values(operations)) {
          for (const { action, roles, roles_on_own_objects } of operation['x-switchboard-access']?.actions ?? []) {
            table[action] = { roles, ownRoles: roles_on_own_objects ?? [] };
          }
        }
      }
      if (Object.keys(table).length === 0) this.error(`${documentPath} names no action in x-switchboard-access`);
      return `export default ${JSON.stringify(table)};`;
    },
  };
}
