import { createDb, type Knex } from '@switchboard/runtime/db';
import { type MeshSuite, meshSuiteOfFile } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll } from 'vitest';

/** The mesh of an identity suite, with identity's database and the mailbox folder. */
export interface IdentitySuite extends MeshSuite {
  db: Knex;
  mailbox: string;
}

/** Verification resends per client address here: small, so a test reaches it; each test acts from an address of its own. */
export const verificationResendsPerIp = 5;

/**
 * meshSuiteOfFile for the account suites: the gateway trusts one proxy hop, so each test can act
 * from an address of its own (the per-address limits), and the tests read identity's tables.
 */
export function identitySuiteOfFile(): IdentitySuite {
  const suite = meshSuiteOfFile(() => ({
    GATEWAY_TRUSTED_PROXIES: '127.0.0.1,::1',
    VERIFICATION_RESENDS_PER_IP_PER_HOUR: String(verificationResendsPerIp),
  })) as IdentitySuite;
  beforeAll(() => {
    suite.db = createDb(suite.mesh.env.DATABASE_URL, 'identity', 2);
    suite.mailbox = suite.mesh.env.MAILBOX_DIR;
  });
  // Hooks after the tests run in reverse: the pool closes before the mesh stops.
  afterAll(async () => {
    await suite.db?.destroy();
  });
  return suite;
}
