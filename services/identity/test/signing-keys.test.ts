import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createDb } from '@switchboard/runtime/db';
import { dropDatabase, ensureDatabase } from '@switchboard/runtime/infra';
import { AuthService } from '@switchboard/runtime/gen/switchboard/identity/v1/identity_pb';
import { meshClient, requireEnv, startIdentity, type RunningIdentity } from './helpers.js';

/**
 * Two replicas starting together on an empty database: both migrate (one waits for the other's
 * lock) and both try to create the first signing key; exactly one key ends up active and both
 * replicas publish and sign with it.
 */
describe('signing key on concurrent first starts', () => {
  const url = new URL(requireEnv('DATABASE_URL'));
  url.pathname = `/${url.pathname.slice(1)}_replicas_${randomBytes(3).toString('hex')}`;
  const databaseUrl = url.toString();
  const replicas: RunningIdentity[] = [];

  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.stop()));
    await dropDatabase(databaseUrl).catch(() => undefined);
  });

  it('ends with one active key that both replicas use', async () => {
    await ensureDatabase(databaseUrl);
    const started = await Promise.allSettled([0, 1].map(() => startIdentity({ env: { DATABASE_URL: databaseUrl } })));
    for (const result of started) if (result.status === 'fulfilled') replicas.push(result.value);
    for (const result of started) if (result.status === 'rejected') throw result.reason;

    const jwks = await Promise.all(replicas.map((replica) => meshClient(AuthService, replica.baseUrl).getJwks({})));
    expect(jwks[0].keys).toHaveLength(1);
    expect(jwks[1].keys.map((key) => key.kid)).toEqual(jwks[0].keys.map((key) => key.kid));

    const db = createDb(databaseUrl, 'identity', 1);
    try {
      const rows = await db('signing_keys').select('kid', 'status');
      expect(rows).toEqual([{ kid: jwks[0].keys[0].kid, status: 'active' }]);
    } finally {
      await db.destroy();
    }
  });
});
