import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { runEmbeddedPostgres } from './dev/embedded-postgres.js';
import type { Logger } from './log.js';

/** A dependency the mesh uses, and how to stop it if this process started it. */
export interface Dependency {
  url: string;
  stop?: () => Promise<void>;
}

export function isPortOpen(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (open: boolean) => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Ports handed out by this process: never twice, even if one is not bound yet. */
const handedOut = new Set<number>();

/** Whether `port` can be listened on at `host` (default every address, as containers listen). */
export function canListen(port: number, host = '0.0.0.0'): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/** The process listening on TCP `port` ("node (pid 123)"), when `ss` can tell; undefined otherwise. */
export function portHolder(port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile('ss', ['-Hltnp', `sport = :${port}`], { timeout: 2000 }, (err, stdout) => {
      const match = err ? null : /users:\(\("([^"]+)",pid=(\d+)/.exec(stdout);
      resolve(match ? `${match[1]} (pid ${match[2]})` : undefined);
    });
  });
}

/**
 * A port to start a component on. Chosen below Linux's ephemeral range (32768+): a port the
 * kernel hands out for `listen(0)` is one it may also give an outgoing connection before the
 * component binds it, which made a test mesh fail now and then with EADDRINUSE.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (handedOut.has(port) || !(await canListen(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error('no free port between 20000 and 32000');
}

/** Creates the database named in `url` when it does not exist yet. */
export async function ensureDatabase(url: string): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.slice(1));
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 3000 });
  await client.connect().catch((err: Error) => {
    const safe = new URL(url);
    if (safe.password) safe.password = '***';
    throw new Error(
      `Postgres is not reachable at ${safe.host || 'its default address'} (DATABASE_URL=${safe.toString()}): ${err.message}. Start Postgres, or fix or unset DATABASE_URL (without it a local server on 127.0.0.1:5432, else an embedded one, is used).`,
    );
  });
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) {
      await client.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err; // created concurrently
      });
    }
  } finally {
    await client.end();
  }
}

export async function dropDatabase(url: string): Promise<void> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${name.replace(/"/g, '""')}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

const dockerAvailable = () => existsSync('/var/run/docker.sock') || Boolean(process.env.DOCKER_HOST);

/**
 * Postgres for the mesh (docs/operations.md#running-on-one-machine): DATABASE_URL if set; else a server on 127.0.0.1:5432;
 * else (tests only) a testcontainer when a Docker engine runs; else an embedded Postgres
 * with its data under `dataDir`.
 */
export async function resolvePostgres(options: { dataDir: string; database: string; log: Logger; allowContainers?: boolean }): Promise<Dependency> {
  const { log } = options;
  if (process.env.DATABASE_URL) {
    await ensureDatabase(process.env.DATABASE_URL);
    return { url: process.env.DATABASE_URL };
  }
  if (await isPortOpen('127.0.0.1', 5432)) {
    const url = `postgres://postgres@127.0.0.1:5432/${options.database}`;
    await ensureDatabase(url);
    return { url };
  }
  if (options.allowContainers && dockerAvailable()) {
    const { GenericContainer, Wait } = await import('testcontainers');
    const container = await new GenericContainer('postgres:16-alpine')
      .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust' })
      .withExposedPorts(5432)
      .withWaitStrategy(Wait.forLogMessage(/ready to accept connections/, 2))
      .start();
    const url = `postgres://postgres@${container.getHost()}:${container.getMappedPort(5432)}/${options.database}`;
    await ensureDatabase(url);
    return { url, stop: async () => void (await container.stop()) };
  }
  return startEmbeddedPostgres(path.join(options.dataDir, 'postgres'), options.database, log);
}

/**
 * An embedded Postgres (the binaries of the embedded-postgres package) with its data in
 * `databaseDir`. As root it runs as the system user `postgres`; when that user cannot reach the
 * binaries or `databaseDir` (a checkout in a private folder), they are placed where it can, or
 * the start stops at once saying which folder is in the way (see dev/embedded-postgres.ts).
 */
export async function startEmbeddedPostgres(databaseDir: string, database: string, log: Logger): Promise<Dependency> {
  const port = await freePort();
  log.info({ databaseDir, port }, 'no Postgres found: starting an embedded one');
  const server = await runEmbeddedPostgres({ databaseDir, port, user: 'postgres', password: 'postgres', log });
  const url = `postgres://postgres:postgres@127.0.0.1:${port}/${database}`;
  try {
    await ensureDatabase(url);
  } catch (err) {
    await server.stop();
    throw err;
  }
  return { url, stop: () => server.stop() };
}

/**
 * NATS with JetStream: NATS_URL if set; else a server on 127.0.0.1:4222; else (tests only) a
 * testcontainer when Docker runs; else `nats-server` from the PATH.
 */
export async function resolveNats(options: { dataDir: string; log: Logger; allowContainers?: boolean }): Promise<Dependency> {
  if (process.env.NATS_URL) return { url: process.env.NATS_URL };
  if (await isPortOpen('127.0.0.1', 4222)) return { url: 'nats://127.0.0.1:4222' };
  if (options.allowContainers && dockerAvailable()) {
    const { GenericContainer, Wait } = await import('testcontainers');
    const container = await new GenericContainer('nats:2.10-alpine')
      .withCommand(['-js'])
      .withExposedPorts(4222)
      .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
      .start();
    return { url: `nats://${container.getHost()}:${container.getMappedPort(4222)}`, stop: async () => void (await container.stop()) };
  }
  options.log.info('no NATS found: starting nats-server from the PATH');
  return startNatsServer(path.join(options.dataDir, 'nats'));
}

/**
 * Starts `nats-server -js` on a free port (or `port`), storing JetStream data under `storeDir`;
 * with `configFile` (e.g. the authorization `npm run credentials` writes, included), under that configuration.
 */
export async function startNatsServer(storeDir: string, port?: number, configFile?: string): Promise<Dependency & { process: ChildProcess; port: number }> {
  await mkdir(storeDir, { recursive: true });
  const listenPort = port ?? (await freePort());
  const config = configFile ? ['-c', configFile] : [];
  const child = spawn('nats-server', [...config, '-a', '127.0.0.1', '-p', String(listenPort), '-js', '-sd', storeDir], { stdio: 'ignore' });
  const spawnError = new Promise<never>((_, reject) =>
    child.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'ENOENT'
          ? new Error(
              'nats-server is not on the PATH. Install it (Debian/Ubuntu: `apt-get install nats-server`; macOS: `brew install nats-server`) or set NATS_URL.',
            )
          : err,
      ),
    ),
  );
  const deadline = Date.now() + 10_000;
  while (!(await Promise.race([isPortOpen('127.0.0.1', listenPort, 200), spawnError]))) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`nats-server did not start on port ${listenPort}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url: `nats://127.0.0.1:${listenPort}`,
    port: listenPort,
    process: child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
