import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ComponentName, componentNames, type MeshComponent, meshComponents, type ServiceName } from '@switchboard/contracts/components';
import { ConfigError, namespaceOf, readEventsConfig, readInt } from '../config.js';
import { canListen, type Dependency, freePort, isPortOpen, portHolder, resolveNats, resolvePostgres } from '../infra.js';
import { createLogger } from '../log.js';
import { DataKeyRing } from '../secrets.js';
import { readShutdownSettings } from '../shutdown.js';

/**
 * The components this runner starts are data from the contracts package
 * (contracts/src/components.ts): their directories, ports, and which one is the front door.
 */
export type Component = ComponentName;
export const components: readonly Component[] = componentNames;
const rpcServices = meshComponents.filter((component) => component.rpcService);
const frontDoor = meshComponents.find((component) => component.frontDoor) as MeshComponent;
const isService = (component: Component) => rpcServices.some(({ name }) => name === component);

export const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));
/** Loaded before every component, as in the images: it starts tracing when OTEL_* says so (docs/operations.md, "Traces"). */
const tracingEntry = new URL('../tracing.js', import.meta.url).href;

const entryOf = (component: Component) => path.join(repoRoot, meshComponents.find((spec) => spec.name === component)?.dir ?? component, 'dist/src/main.js');

/**
 * V8 flags of every component, as the images start them (deploy/Dockerfile). The young
 * generation has a fixed size, two 4 MB semi-spaces: left to size itself it grew to 32 MB under
 * load and shrank back to 2 MB whenever survival dropped, so a busy process's RSS swung by 30 MB
 * every few minutes with nothing more to hold (the soak bench saw it in every component, and
 * it cost identity its < 10 % target). At 4 MB the idle mesh also stays under its 600 MB target
 * (fixed at 16 MB it did not), and `npm run bench` measured no change in throughput.
 */
export const componentNodeFlags = ['--min-semi-space-size=4', '--max-semi-space-size=4'];

export interface MeshOptions {
  /** Where embedded Postgres, NATS data, the dev mesh secret and the mailbox live. */
  dataDir: string;
  /** Free ports for everything (tests, benchmarks) instead of the settings and defaults of readMeshPorts. */
  randomPorts?: boolean;
  /** Database name when Postgres is discovered (not DATABASE_URL). */
  database?: string;
  /** Each output line of a component; by default lines are kept in memory only. */
  onLine?: (component: Component, line: string) => void;
  /** Extra environment for every component. */
  env?: Record<string, string>;
  /** Extra environment for one component (its own credentials: `npm run credentials`), over `env`. */
  componentEnv?: Partial<Record<Component, Record<string, string>>>;
  /** Node flags for every component (e.g. --cpu-prof when profiling). */
  nodeFlags?: string[];
  /** Let tests use a testcontainer when a Docker engine runs and nothing local answers. */
  allowContainers?: boolean;
  /** A component exited on its own (not stopped by the mesh), with its last output lines. */
  onComponentExit?: (component: Component, code: number | string | null, lastLines: string[]) => void;
}

export interface ComponentExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Mesh {
  gatewayUrl: string;
  urls: Record<ServiceName, string>;
  /** Each component's `/metrics` (its own port, never the public one). */
  metricsUrls: Record<Component, string>;
  env: Record<string, string>;
  /** Everything a component printed so far (JSON log lines). */
  output(component: Component): string;
  pid(component: Component): number | undefined;
  /**
   * Stops one component: SIGTERM (its graceful shutdown), then SIGKILL if it overruns that;
   * resolves with how it exited (undefined when it was not running).
   */
  stopComponent(component: Component): Promise<ComponentExit | undefined>;
  /** SIGKILL (`kill -9`: no shutdown hook runs); resolves once the process is gone. */
  killComponent(component: Component): Promise<void>;
  startComponent(component: Component): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A dev secret: the variable when set, else the one kept in `file` of the data dir, generated
 * (mode 0600) on first use; `created` says this call generated it.
 */
async function devSecret(variable: string, file: string, generate: () => string): Promise<{ value: string; created: boolean }> {
  const given = process.env[variable];
  if (given) return { value: given, created: false };
  if (existsSync(file)) return { value: (await readFile(file, 'utf8')).trim(), created: false };
  const value = generate();
  await writeFile(file, value, { mode: 0o600 });
  return { value, created: true };
}

/** Runs `--rotate-data-key` of every service and waits for it; throws with its output on failure. */
async function rotateDataKeys(env: Record<string, string>, log: ReturnType<typeof createLogger>): Promise<void> {
  for (const { name } of rpcServices) {
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
 * Runs the whole mesh on this machine: Postgres and NATS as docs/operations.md#running-on-one-machine says, each service and
 * the gateway as its own process, and waits until the gateway reports every service ready.
 */
export async function startMesh(options: MeshOptions): Promise<Mesh> {
  const log = createLogger('mesh', 'info');
  await mkdir(options.dataDir, { recursive: true });
  const chosen = options.randomPorts ? undefined : readMeshPorts({ ...process.env, ...options.env });
  const ports = {} as Record<Component, number>;
  const metricsPorts = {} as Record<Component, number>;
  for (const { name } of meshComponents) {
    ports[name] = chosen?.ports[name] ?? (await freePort());
    metricsPorts[name] = chosen?.metricsPorts[name] ?? (await freePort());
  }
  const localUrl = (component: Component) => `http://127.0.0.1:${ports[component]}`;
  // Before anything starts: a busy port stops this start at once, naming it.
  if (!options.randomPorts) {
    await assertPortsFree(ports);
    await assertPortsFree(metricsPorts, true);
  }
  const dependencies: Dependency[] = [];
  // Servers given in `env` (a chaos run's private ones) are used as they are, never looked for.
  const postgres = options.env?.DATABASE_URL
    ? { url: options.env.DATABASE_URL }
    : await resolvePostgres({
        dataDir: options.dataDir,
        database: options.database ?? 'switchboard',
        log,
        allowContainers: options.allowContainers,
      });
  dependencies.push(postgres);
  const nats = options.env?.NATS_URL
    ? { url: options.env.NATS_URL }
    : await resolveNats({ dataDir: options.dataDir, log, allowContainers: options.allowContainers });
  dependencies.push(nats);

  const urls = Object.fromEntries(rpcServices.map(({ name }) => [name, localUrl(name)])) as Record<ServiceName, string>;
  const meshSecretFile = path.join(options.dataDir, 'mesh-secret');
  const dataKeysFile = path.join(options.dataDir, 'data-keys');
  // A data dir with a mesh secret but no data keys holds data from before them (encrypted under
  // the mesh secret): it is moved under the new keys before anything starts.
  const legacyDataDir = existsSync(meshSecretFile) && !existsSync(dataKeysFile);
  const meshSecret = await devSecret('SWITCHBOARD_MESH_SECRET', meshSecretFile, () => randomBytes(32).toString('base64url'));
  const dataKeys = await devSecret('SWITCHBOARD_DATA_KEYS', dataKeysFile, () => DataKeyRing.generateEntry('k1'));
  // The gateway's own: it seals the Idempotency-Key answers it keeps (docs/conventions.md#idempotency).
  const idempotencySecret = await devSecret('SWITCHBOARD_IDEMPOTENCY_SECRET', path.join(options.dataDir, 'idempotency-secret'), () =>
    randomBytes(32).toString('base64url'),
  );
  const env: Record<string, string> = {
    // Development binds loopback only; containers set HOST=0.0.0.0 (deploy/).
    HOST: process.env.HOST ?? '127.0.0.1',
    DATABASE_URL: postgres.url,
    NATS_URL: nats.url,
    SWITCHBOARD_MESH_SECRET: meshSecret.value,
    SWITCHBOARD_DATA_KEYS: dataKeys.value,
    SWITCHBOARD_IDEMPOTENCY_SECRET: idempotencySecret.value,
    MAILBOX_DIR: process.env.MAILBOX_DIR ?? path.join(options.dataDir, 'mailbox'),
    // Links the mesh hands out (mailed links, the sandbox checkout page) point at this gateway, by
    // the address it listens on and the ready line prints: the dashboard's session cookie is kept
    // per host, so a link to localhost would sign out a user of 127.0.0.1 (docs/api/identity.md#the-dashboards-session-cookie).
    PUBLIC_BASE_URL: process.env.PUBLIC_BASE_URL ?? localUrl(frontDoor.name),
    // Where each component finds the others (KEYS_URL, DATA_PLANE_URL, …).
    ...Object.fromEntries(meshComponents.flatMap(({ name, urlVariable }) => (urlVariable ? [[urlVariable, localUrl(name)]] : []))),
    // The NATS names of a mesh follow its database, so meshes on their own databases (two
    // checkouts, two data dirs) never share a stream (docs/decisions.md#namespaces-and-ports).
    SWITCHBOARD_NAMESPACE: process.env.SWITCHBOARD_NAMESPACE || namespaceOf(decodeURIComponent(new URL(postgres.url).pathname.slice(1))),
    ...options.env,
  };
  // A bad namespace stops this start, naming the variable, before any component starts.
  readEventsConfig({ ...process.env, ...env });

  if (legacyDataDir && dataKeys.created) {
    // Not half-done: if the move fails, the new keys go too, so the next start tries again.
    await rotateDataKeys(env, log).catch(async (err) => {
      await rm(dataKeysFile, { force: true });
      throw err;
    });
  }

  const shutdown = readShutdownSettings({ ...process.env, ...env });
  const children = new Map<Component, ChildProcess>();
  const outputs = new Map<Component, string[]>();
  const start = (component: Component) => {
    const child = spawn(process.execPath, [...componentNodeFlags, ...(options.nodeFlags ?? []), '--import', tracingEntry, entryOf(component)], {
      cwd: repoRoot,
      env: { ...process.env, ...env, ...options.componentEnv?.[component], PORT: String(ports[component]), METRICS_PORT: String(metricsPorts[component]) },
      // The IPC channel is how a component notices that its runner died (it stops then).
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      // A process group of its own: Ctrl-C at the terminal reaches the runner alone, which stops
      // the components in order (stopAll) instead of all at once.
      detached: true,
    });
    children.set(component, child);
    child.once('exit', (code, signal) => {
      if (stopping.has(component) || children.get(component) !== child) return;
      options.onComponentExit?.(component, code ?? signal, (outputs.get(component) ?? []).slice(-20));
    });
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
  const stopping = new Set<Component>();
  const stopComponent = async (component: Component, signal: NodeJS.Signals = 'SIGTERM'): Promise<ComponentExit | undefined> => {
    const child = children.get(component);
    if (!child || child.exitCode !== null || child.signalCode !== null) return undefined;
    stopping.add(component);
    const exited = new Promise<ComponentExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    child.kill(signal);
    // The component exits 1 by itself once past delay + drain + 10 s; this is for one that hangs.
    const timer = setTimeout(() => child.kill('SIGKILL'), shutdown.delayMs + shutdown.drainTimeoutMs + 15_000);
    const exit = await exited;
    clearTimeout(timer);
    stopping.delete(component);
    return exit;
  };
  const gatewayUrl = localUrl(frontDoor.name);
  const stopAll = async () => {
    // The gateway and the data plane first, then the services they call: stopped together, a
    // client still polling a service that had just closed warned of ECONNREFUSED at every stop.
    await Promise.all(components.filter((component) => !isService(component)).map((component) => stopComponent(component)));
    await Promise.all(components.filter(isService).map((component) => stopComponent(component)));
    for (const dependency of dependencies.reverse()) await dependency.stop?.();
  };

  try {
    // The services first: the data plane and the gateway load from them as they start, and
    // would otherwise find them not listening yet (a warning at every start).
    for (const { name } of rpcServices) start(name);
    await waitUntilListening(
      rpcServices.map(({ name }) => ports[name]),
      children,
      outputs,
      60_000,
    );
    for (const component of components) if (!children.has(component)) start(component);
    await waitUntilReady(gatewayUrl, children, outputs, 60_000);
  } catch (err) {
    await stopAll();
    throw err;
  }
  return {
    gatewayUrl,
    urls,
    metricsUrls: Object.fromEntries(components.map((c) => [c, `http://127.0.0.1:${metricsPorts[c]}/metrics`])) as Record<Component, string>,
    env,
    output: (component) => (outputs.get(component) ?? []).join('\n'),
    pid: (component) => children.get(component)?.pid,
    stopComponent: (component) => stopComponent(component),
    killComponent: async (component) => void (await stopComponent(component, 'SIGKILL')),
    async startComponent(component) {
      start(component);
      await waitUntilReady(gatewayUrl, children, outputs, 30_000);
    },
    stop: stopAll,
  };
}

/**
 * The ports `npm start` gives its components: each component's variable (`PORT` for the gateway,
 * `KEYS_PORT`, `GATEWAY_METRICS_PORT`, …, contracts/src/components.ts), else its default shifted
 * by SWITCHBOARD_PORT_OFFSET, so a second checkout moves everything with one setting.
 */
export function readMeshPorts(env: Record<string, string | undefined> = process.env): {
  ports: Record<Component, number>;
  metricsPorts: Record<Component, number>;
} {
  const offset = readInt('SWITCHBOARD_PORT_OFFSET', 0, env);
  const read = (variable: string, fallback: number) => {
    const port = readInt(variable, fallback + offset, env, 1);
    if (port > 65_535) {
      throw new ConfigError(
        env[variable] ? `${variable} must be a port (1-65535), got ${port}` : `SWITCHBOARD_PORT_OFFSET=${offset} moves ${variable} past 65535 (${port})`,
      );
    }
    return port;
  };
  const ports = {} as Record<Component, number>;
  const metricsPorts = {} as Record<Component, number>;
  for (const component of meshComponents) {
    ports[component.name] = read(component.portVariable, component.port);
    metricsPorts[component.name] = read(component.metricsPortVariable, component.metricsPort);
  }
  return { ports, metricsPorts };
}

/** Refuses to start over ports another process holds, naming the port, the component, the holder and the setting that moves it. */
async function assertPortsFree(ports: Record<Component, number>, metrics = false): Promise<void> {
  for (const [component, port] of Object.entries(ports) as Array<[Component, number]>) {
    if (await canListen(port)) continue;
    const holder = await portHolder(port);
    const spec = meshComponents.find(({ name }) => name === component) as MeshComponent;
    const variable = metrics ? spec.metricsPortVariable : spec.portVariable;
    throw new Error(
      `port ${port} (${component}${metrics ? ' metrics' : ''}) is already in use${holder ? ` by ${holder}` : ''}: is another Switchboard running? ` +
        `Stop it, or move this one: set ${variable}, or SWITCHBOARD_PORT_OFFSET (e.g. 1000) to move every port.`,
    );
  }
}

/** Throws with its last output when a component exited. */
function assertRunning(children: Map<Component, ChildProcess>, outputs: Map<Component, string[]>): void {
  for (const [component, child] of children) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${component} exited (${child.exitCode ?? child.signalCode}):\n${(outputs.get(component) ?? []).slice(-20).join('\n')}`);
    }
  }
}

/** Waits until something accepts connections on each of `ports` (the services listen once migrated). */
async function waitUntilListening(
  ports: number[],
  children: Map<Component, ChildProcess>,
  outputs: Map<Component, string[]>,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let waiting = ports;
  while (waiting.length > 0) {
    assertRunning(children, outputs);
    if (Date.now() > deadline) throw new Error(`the services did not listen within ${timeoutMs} ms (ports ${waiting.join(', ')})`);
    const open = await Promise.all(waiting.map((port) => isPortOpen('127.0.0.1', port, 200)));
    waiting = waiting.filter((_, index) => !open[index]);
    if (waiting.length > 0) await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function waitUntilReady(gatewayUrl: string, children: Map<Component, ChildProcess>, outputs: Map<Component, string[]>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    assertRunning(children, outputs);
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
