import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServiceName, serviceNames, servicePorts } from '../config.js';
import { type Dependency, freePort, resolveNats, resolvePostgres } from '../infra.js';
import { createLogger } from '../log.js';
import { DataKeyRing } from '../secrets.js';

export type Component = ServiceName | 'gateway';
export const components: Component[] = [...serviceNames, 'gateway'];

export const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));

const entryOf = (component: Component) => path.join(repoRoot, component === 'gateway' ? 'gateway/dist/src/main.js' : `services/${component}/dist/src/main.js`);

export interface MeshOptions {
  /** Where embedded Postgres, NATS data, the dev mesh secret and the mailbox live. */
  dataDir: string;
  /** Free ports for everything (tests, benchmarks) instead of the defaults of SPEC §8. */
  randomPorts?: boolean;
  /** Database name when Postgres is discovered (not DATABASE_URL). */
  database?: string;
  /** Each output line of a component; by default lines are kept in memory only. */
  onLine?: (component: Component, line: string) => void;
  /** Extra environment for every component. */
  env?: Record<string, string>;
  /** Node flags for every component (e.g. --cpu-prof when profiling). */
  nodeFlags?: string[];
  /** Let tests use a testcontainer when a Docker engine runs and nothing local answers. */
  allowContainers?: boolean;
}

export interface Mesh {
  gatewayUrl: string;
  urls: Record<ServiceName, string>;
  env: Record<string, string>;
  /** Everything a component printed so far (JSON log lines). */
  output(component: Component): string;
  pid(component: Component): number | undefined;
  /** Stops one component (SIGTERM, then SIGKILL after 5 s). */
  stopComponent(component: Component): Promise<void>;
  startComponent(component: Component): Promise<void>;
  stop(): Promise<void>;
}

/** The dev mesh secret: SWITCHBOARD_MESH_SECRET, else one generated once per data dir. */
async function meshSecret(dataDir: string): Promise<string> {
  if (process.env.SWITCHBOARD_MESH_SECRET) return process.env.SWITCHBOARD_MESH_SECRET;
  const file = path.join(dataDir, 'mesh-secret');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const secret = randomBytes(32).toString('base64url');
  await writeFile(file, secret, { mode: 0o600 });
  return secret;
}

/**
 * The dev data keys: SWITCHBOARD_DATA_KEYS, else a ring generated once per data dir. `legacy` says
 * the ring was just created for a data dir that already had a mesh secret, so its data may still
 * be encrypted the way it was before data keys (under the mesh secret) and must be moved.
 */
async function dataKeys(dataDir: string): Promise<{ ring: string; legacy: boolean }> {
  if (process.env.SWITCHBOARD_DATA_KEYS) return { ring: process.env.SWITCHBOARD_DATA_KEYS, legacy: false };
  const file = path.join(dataDir, 'data-keys');
  if (existsSync(file)) return { ring: (await readFile(file, 'utf8')).trim(), legacy: false };
  const legacy = existsSync(path.join(dataDir, 'mesh-secret'));
  const ring = DataKeyRing.generateEntry('k1');
  await writeFile(file, ring, { mode: 0o600 });
  return { ring, legacy };
}

/** Runs `--rotate-data-key` of every service and waits for it; throws with its output on failure. */
async function rotateDataKeys(env: Record<string, string>, log: ReturnType<typeof createLogger>): Promise<void> {
  for (const name of serviceNames) {
    const child = spawn(process.execPath, [entryOf(name), '--rotate-data-key'], {
      cwd: repoRoot,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    for (const stream of [child.stdout, child.stderr]) stream?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    if (code !== 0) throw new Error(`moving the secrets of ${name} under the data keys failed:\n${output}`);
  }
  log.info('moved the secrets of this data dir under its new data keys (.data/data-keys)');
}

/**
 * Runs the whole mesh on this machine: Postgres and NATS as SPEC §11 says, each service and
 * the gateway as its own process, and waits until the gateway reports every service ready.
 */
export async function startMesh(options: MeshOptions): Promise<Mesh> {
  const log = createLogger('mesh', 'info');
  await mkdir(options.dataDir, { recursive: true });
  const dependencies: Dependency[] = [];
  const postgres = await resolvePostgres({
    dataDir: options.dataDir,
    database: options.database ?? 'switchboard',
    log,
    allowContainers: options.allowContainers,
  });
  dependencies.push(postgres);
  const nats = await resolveNats({ dataDir: options.dataDir, log, allowContainers: options.allowContainers });
  dependencies.push(nats);

  const ports = {} as Record<Component, number>;
  for (const name of serviceNames) ports[name] = options.randomPorts ? await freePort() : servicePorts[name];
  ports.gateway = options.randomPorts ? await freePort() : Number(process.env.PORT ?? 8080);
  const urls = Object.fromEntries(serviceNames.map((name) => [name, `http://127.0.0.1:${ports[name]}`])) as Record<ServiceName, string>;
  const keys = await dataKeys(options.dataDir);
  const env: Record<string, string> = {
    DATABASE_URL: postgres.url,
    NATS_URL: nats.url,
    SWITCHBOARD_MESH_SECRET: await meshSecret(options.dataDir),
    SWITCHBOARD_DATA_KEYS: keys.ring,
    MAILBOX_DIR: process.env.MAILBOX_DIR ?? path.join(options.dataDir, 'mailbox'),
    ...Object.fromEntries(serviceNames.map((name) => [`${name.toUpperCase()}_URL`, urls[name]])),
    ...options.env,
  };

  if (keys.legacy) await rotateDataKeys(env, log);

  const children = new Map<Component, ChildProcess>();
  const outputs = new Map<Component, string[]>();
  const start = (component: Component) => {
    const child = spawn(process.execPath, [...(options.nodeFlags ?? []), entryOf(component)], {
      cwd: repoRoot,
      env: { ...process.env, ...env, PORT: String(ports[component]) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.set(component, child);
    const lines = outputs.get(component) ?? [];
    outputs.set(component, lines);
    for (const stream of [child.stdout!, child.stderr!]) {
      let pending = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        pending += chunk;
        const parts = pending.split('\n');
        pending = parts.pop()!;
        for (const line of parts) {
          lines.push(line);
          options.onLine?.(component, line);
        }
      });
    }
    return child;
  };
  const stopComponent = async (component: Component) => {
    const child = children.get(component);
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  };
  const gatewayUrl = `http://127.0.0.1:${ports.gateway}`;
  const stopAll = async () => {
    await Promise.all(components.map(stopComponent));
    for (const dependency of dependencies.reverse()) await dependency.stop?.();
  };

  try {
    for (const name of serviceNames) start(name);
    start('gateway');
    await waitUntilReady(gatewayUrl, children, outputs, 60_000);
  } catch (err) {
    await stopAll();
    throw err;
  }
  return {
    gatewayUrl,
    urls,
    env,
    output: (component) => (outputs.get(component) ?? []).join('\n'),
    pid: (component) => children.get(component)?.pid,
    stopComponent,
    async startComponent(component) {
      start(component);
      await waitUntilReady(gatewayUrl, children, outputs, 30_000);
    },
    stop: stopAll,
  };
}

async function waitUntilReady(gatewayUrl: string, children: Map<Component, ChildProcess>, outputs: Map<Component, string[]>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    for (const [component, child] of children) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`${component} exited (${child.exitCode ?? child.signalCode}):\n${(outputs.get(component) ?? []).slice(-20).join('\n')}`);
      }
    }
    try {
      const response = await fetch(`${gatewayUrl}/readyz`, { signal: AbortSignal.timeout(2000) });
      last = await response.text();
      if (response.ok) return;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the mesh did not become ready within ${timeoutMs} ms: ${last}`);
}
