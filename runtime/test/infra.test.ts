import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isPortOpen, startEmbeddedPostgres, startNatsServer } from '../src/infra.js';
import { createLogger } from '../src/log.js';
import { queryOnce } from './query-once.js';

const log = createLogger('infra-test', 'silent');
const dirs: string[] = [];
const tempDir = async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'switchboard-infra-'));
  // As root, the embedded Postgres runs as the postgres user: 0755 keeps its data dir where it is
  // (embedded-postgres-root.test.ts covers a private folder).
  await chmod(dir, 0o755);
  dirs.push(dir);
  return dir;
};

afterAll(async () => {
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

describe('the fallbacks of npm start when nothing runs locally (docs/operations.md#running-on-one-machine)', () => {
  it('runs an embedded Postgres, keeping its data across restarts', async () => {
    const dataDir = path.join(await tempDir(), 'postgres');
    const first = await startEmbeddedPostgres(dataDir, 'switchboard', log);
    await queryOnce(first.url, 'CREATE TABLE kept (value text); INSERT INTO kept VALUES ($$still here$$)');
    await first.stop!();

    const second = await startEmbeddedPostgres(dataDir, 'switchboard', log);
    const rows = await queryOnce(second.url, 'SELECT value FROM kept');
    await second.stop!();
    expect(rows).toEqual([{ value: 'still here' }]);
  });

  it('starts nats-server from the PATH with JetStream and stops it', async () => {
    const nats = await startNatsServer(await tempDir());
    expect(await isPortOpen('127.0.0.1', nats.port)).toBe(true);
    await nats.stop!();
    expect(await isPortOpen('127.0.0.1', nats.port)).toBe(false);
  });

  it('names the install command when nats-server is not on the PATH', async () => {
    const saved = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      await expect(startNatsServer(await tempDir())).rejects.toThrow(/apt-get install nats-server/);
    } finally {
      process.env.PATH = saved;
    }
  });
});
