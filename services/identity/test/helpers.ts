import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DescService } from '@bufbuild/protobuf';
import type { Client } from '@connectrpc/connect';
import { dropDatabase } from '@switchboard/runtime/infra';
import { type MeshClaims, MeshTokens } from '@switchboard/runtime/mesh-token';
import { eventually, type RunningService, requireEnv, meshClient as serviceClient, startService } from '@switchboard/runtime/testing';

import { AuditSecretsError, checkAuditRecordsForSecrets } from '../../../runtime/test/audit-secrets.js';

export { eventually, requireEnv };

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const identityMain = path.join(repoRoot, 'services/identity/dist/src/main.js');

export interface RunningIdentity extends RunningService {
  mailboxDir: string;
}

/** The compiled identity service on a free port (see startService), mail going to a fresh folder. */
export async function startIdentity(options: { env?: Record<string, string>; healthTimeoutMs?: number } = {}): Promise<RunningIdentity> {
  const mailboxDir = await mkdtemp(path.join(tmpdir(), 'identity-mailbox-'));
  try {
    const service = await startService(identityMain, { ...options, env: { MAILBOX_DIR: mailboxDir, ...options.env } });
    const stop = async () => {
      await service.stop();
      await rm(mailboxDir, { recursive: true, force: true });
    };
    return { ...service, mailboxDir, stop };
  } catch (err) {
    await rm(mailboxDir, { recursive: true, force: true });
    throw err;
  }
}

/** A Connect client of identity whose calls carry a mesh token with `claims` (none when null). */
export function meshClient<T extends DescService>(service: T, baseUrl: string, claims: MeshClaims | null = { caller: 'gateway' }): Client<T> {
  return serviceClient(service, baseUrl, 'identity', claims);
}

export function mintMeshToken(audience: string, claims: MeshClaims): Promise<string> {
  return new MeshTokens(requireEnv('SWITCHBOARD_MESH_SECRET')).mint(audience, claims);
}

/** A unique address for one test. */
/**
 * Drops a test's private database once its audit records are checked for secrets, as the run's
 * teardown checks the shared database (runtime/test/global-setup.ts, docs/api/audit.md#no-secrets):
 * a finding fails the file; a database that cannot be read (never created) is only dropped.
 */
export async function dropCheckedDatabase(databaseUrl: string): Promise<void> {
  try {
    await checkAuditRecordsForSecrets(databaseUrl, { outboxes: true });
  } catch (err) {
    if (err instanceof AuditSecretsError) throw err;
  } finally {
    await dropDatabase(databaseUrl).catch(() => undefined);
  }
}

export function uniqueEmail(tag = 'user'): string {
  return `${tag}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}@example.com`;
}
