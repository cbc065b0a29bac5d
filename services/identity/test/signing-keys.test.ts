import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { AuthService } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { SigningKeys } from '@switchboard/identity/signing-keys';
import { createDb, migrate } from '@switchboard/runtime/db';
import { ensureDatabase } from '@switchboard/runtime/infra';
import { createLogger } from '@switchboard/runtime/log';
import { DataKeyRing } from '@switchboard/runtime/secrets';
import { afterAll, describe, expect, it } from 'vitest';
import { dropCheckedDatabase, meshClient, type RunningIdentity, repoRoot, requireEnv, startIdentity } from './helpers.js';

const migrationsDir = path.join(repoRoot, 'services/identity/dist/migrations');

/**
 * Replicas starting together on an empty key table all try to create the first signing key;
 * exactly one key ends up active and every replica signs with it and publishes it.
 */
describe('signing key on concurrent first starts', () => {
  const url = new URL(requireEnv('DATABASE_URL'));
  url.pathname = `/${url.pathname.slice(1)}_replicas_${randomBytes(3).toString('hex')}`;
  const databaseUrl = url.toString();
  const replicas: RunningIdentity[] = [];

  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.stop()));
    await dropCheckedDatabase(databaseUrl);
  });

  it('converges on one active key when many loaders race in one schema', async () => {
    const schema = `identity_race_${randomBytes(3).toString('hex')}`;
    const db = createDb(requireEnv('DATABASE_URL'), schema, 10);
    try {
      await migrate(db, schema, migrationsDir);
      const log = createLogger('test', 'warn');
      const dataKeys = DataKeyRing.parse(requireEnv('SWITCHBOARD_DATA_KEYS'));
      const loaders = Array.from({ length: 8 }, () => new SigningKeys({ db, log, dataKeys }));
      const keys = await Promise.all(loaders.map((loader) => loader.ensureActiveKey()));
      expect(new Set(keys.map((key) => key.kid)).size).toBe(1);
      expect(await db('signing_keys').select('kid', 'status')).toEqual([{ kid: keys[0].kid, status: 'active' }]);
    } finally {
      await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
      await db.destroy();
    }
  });

  it('ends with one active key that two replicas started together both use', async () => {
    await ensureDatabase(databaseUrl);
    // Both replicas migrate the empty schema at once too (serialised by an advisory lock).
    const db = createDb(databaseUrl, 'identity', 1);
    try {
      const started = await Promise.allSettled([0, 1].map(() => startIdentity({ env: { DATABASE_URL: databaseUrl } })));
      for (const result of started) if (result.status === 'fulfilled') replicas.push(result.value);
      for (const result of started) if (result.status === 'rejected') throw result.reason;

      const jwks = await Promise.all(replicas.map((replica) => meshClient(AuthService, replica.baseUrl).getJwks({})));
      expect(jwks[0].keys).toHaveLength(1);
      expect(jwks[1].keys.map((key) => key.kid)).toEqual(jwks[0].keys.map((key) => key.kid));
      expect(await db('signing_keys').select('kid', 'status')).toEqual([{ kid: jwks[0].keys[0].kid, status: 'active' }]);
    } finally {
      await db.destroy();
    }
  });
});
