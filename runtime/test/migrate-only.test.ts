import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { repoRoot } from '@switchboard/runtime/dev/mesh';
import { dropDatabase, ensureDatabase } from '@switchboard/runtime/infra';
import { requireEnv } from '@switchboard/runtime/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * `main.js --migrate`, the init container of every service Deployment (deploy/base): it brings
 * the service's schema to the latest migration and exits 0 without serving anything, and exits
 * non-zero with a line naming the failure when it cannot migrate.
 */

const main = path.join(repoRoot, 'services/keys/dist/src/main.js');
const expectedMigrations = readdirSync(path.join(repoRoot, 'services/keys/dist/migrations'))
  .filter((file) => file.endsWith('.js'))
  .map((file) => file.replace(/\.js$/, ''))
  .sort();

function databaseUrl(name: string): string {
  const url = new URL(requireEnv('DATABASE_URL'));
  url.pathname = `/${name}`;
  return url.toString();
}

interface Exit {
  code: number | null;
  output: string;
  /** The JSON log lines, parsed. */
  lines: Array<Record<string, unknown>>;
}

function runMigrate(env: Record<string, string>): Promise<Exit> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [main, '--migrate'],
      { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000 },
      (_err, stdout, stderr) => {
        const output = stdout + stderr;
        const lines = output
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as Record<string, unknown>);
        resolve({ code: child.exitCode, output, lines });
      },
    );
  });
}

describe('a service started with --migrate', () => {
  const database = databaseUrl(`sb_migrate_${randomBytes(4).toString('hex')}`);
  /** Held while it runs: a process that tried to serve on these ports would fail to bind. */
  const held: net.Server[] = [];
  let env: Record<string, string>;

  beforeAll(async () => {
    await ensureDatabase(database);
    const ports = await Promise.all(
      [0, 1].map(async () => {
        const server = net.createServer();
        held.push(server);
        await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
        return String((server.address() as net.AddressInfo).port);
      }),
    );
    env = {
      DATABASE_URL: database,
      SWITCHBOARD_MESH_SECRET: requireEnv('SWITCHBOARD_MESH_SECRET'),
      SWITCHBOARD_DATA_KEYS: requireEnv('SWITCHBOARD_DATA_KEYS'),
      // Nothing listens there: migrating needs no NATS.
      NATS_URL: 'nats://127.0.0.1:1',
      PORT: ports[0],
      METRICS_PORT: ports[1],
      LOG_LEVEL: 'info',
    };
  });

  afterAll(async () => {
    for (const server of held) server.close();
    await dropDatabase(database);
  });

  async function migrationsTable(): Promise<string[]> {
    const client = new pg.Client({ connectionString: database });
    await client.connect();
    try {
      const { rows } = await client.query<{ name: string }>('SELECT name FROM keys.knex_migrations ORDER BY id');
      return rows.map((row) => row.name);
    } finally {
      await client.end();
    }
  }

  it('migrates a fresh database, exits 0 and never serves', async () => {
    const run = await runMigrate(env);
    expect(run.code, run.output).toBe(0);
    expect(await migrationsTable()).toEqual(expectedMigrations);
    expect(run.lines.find((line) => line.msg === 'keys migrations done')?.applied).toEqual(expectedMigrations);
    expect(run.output).not.toContain('listening');
  });

  it('applies nothing the second time', async () => {
    const run = await runMigrate(env);
    expect(run.code, run.output).toBe(0);
    expect(run.lines.find((line) => line.msg === 'keys migrations done')?.applied).toEqual([]);
    expect(await migrationsTable()).toEqual(expectedMigrations);
  });

  it('exits 1 with a line naming the failure when it cannot migrate', async () => {
    const missing = databaseUrl(`sb_missing_${randomBytes(4).toString('hex')}`);
    const run = await runMigrate({ ...env, DATABASE_URL: missing });
    expect(run.code, run.output).toBe(1);
    const failure = run.lines.find((line) => line.msg === 'keys migrations failed');
    expect(failure, run.output).toBeDefined();
    expect(JSON.stringify(failure?.err)).toContain('does not exist');
  });
});
