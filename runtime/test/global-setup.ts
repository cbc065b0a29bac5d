import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { checkPayloadFindings, WebhookPayloadError } from '@switchboard/testkit/webhook-payloads';
import { type Dependency, dropDatabase, resolveNats, resolvePostgres } from '../src/infra.js';
import { createLogger } from '../src/log.js';
import { DataKeyRing } from '../src/secrets.js';
import { AuditSecretsError, checkAuditRecordsForSecrets } from './audit-secrets.js';

/**
 * One fresh database and one private event stream per test run, on the Postgres and NATS the
 * mesh would use (docs/operations.md#running-on-one-machine), so runs never see each other's data.
 */
export default async function setup() {
  const log = createLogger('test-setup', 'warn');
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const dataDir = await mkdtemp(path.join(tmpdir(), 'switchboard-test-'));
  const saved = process.env.DATABASE_URL;
  const postgres: Dependency = await resolvePostgres({ dataDir, database: `sb_test_${runId}`, log, allowContainers: true });
  const nats: Dependency = await resolveNats({ dataDir, log, allowContainers: true });
  // resolvePostgres used DATABASE_URL as is when set: point at a fresh database beside it instead.
  let databaseUrl = postgres.url;
  if (saved) {
    const url = new URL(saved);
    url.pathname = `/sb_test_${runId}`;
    databaseUrl = url.toString();
    const { ensureDatabase } = await import('../src/infra.js');
    await ensureDatabase(databaseUrl);
  }
  process.env.DATABASE_URL = databaseUrl;
  process.env.NATS_URL = nats.url;
  process.env.EVENTS_SUBJECT_PREFIX = `sbtest.${runId}`;
  process.env.EVENTS_STREAM = `SBTEST_${runId}`;
  process.env.WORK_SUBJECT_PREFIX = `sbwork.${runId}`;
  process.env.WORK_STREAM = `SBWORK_${runId}`;
  process.env.SWITCHBOARD_MESH_SECRET = randomBytes(32).toString('base64url');
  process.env.SWITCHBOARD_DATA_KEYS = DataKeyRing.generateEntry('test1');
  process.env.TEST_DATA_DIR = dataDir;

  return async () => {
    // Every audit record the whole run wrote, checked for secrets before the database goes.
    let secretsFound: AuditSecretsError | undefined;
    try {
      await checkAuditRecordsForSecrets(databaseUrl);
    } catch (err) {
      if (err instanceof AuditSecretsError) secretsFound = err;
      else log.warn({ err: (err as Error).message }, 'could not check the audit records for secrets');
    }
    // Every webhook delivery a test receiver got, checked against the event catalog as it arrived.
    let payloadsBroken: WebhookPayloadError | undefined;
    try {
      checkPayloadFindings(dataDir);
    } catch (err) {
      if (err instanceof WebhookPayloadError) payloadsBroken = err;
      else log.warn({ err: (err as Error).message }, 'could not read the webhook payload findings');
    }
    try {
      const nc = await connect({ servers: nats.url, timeout: 2000 });
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(`SBTEST_${runId}`).catch(() => false);
      await jsm.streams.delete(`SBWORK_${runId}`).catch(() => false);
      await nc.close();
    } catch {
      // NATS gone at teardown: nothing to clean.
    }
    await dropDatabase(databaseUrl).catch(() => undefined);
    await nats.stop?.();
    await postgres.stop?.();
    // Vitest logs a teardown's error without failing the run: the exit code says it.
    if (secretsFound || payloadsBroken) process.exitCode = 1;
    if (secretsFound && payloadsBroken) throw new AggregateError([secretsFound, payloadsBroken], `${secretsFound.message}\n${payloadsBroken.message}`);
    if (secretsFound ?? payloadsBroken) throw secretsFound ?? payloadsBroken;
  };
}
