import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { DescService } from '@bufbuild/protobuf';
import { type Client, Code, ConnectError, createClient, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Health, HealthCheckResponse_ServingStatus } from '@switchboard/contracts/grpc/health/v1/health_pb';
import { freePort } from './infra.js';
import { type MeshClaims, MeshTokens } from './mesh-token.js';

/**
 * Polls `probe` until it gives a value (anything but undefined, null or false), or fails after
 * `timeoutMs` with the last error it threw. Tests wait for asynchronous effects with this,
 * never with a fixed sleep.
 */
export async function eventually<T>(
  probe: () => T | Promise<T>,
  what: string,
  timeoutMs = 10_000,
  intervalMs = 25,
): Promise<Exclude<T, undefined | null | false>> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) return value as Exclude<T, undefined | null | false>;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

export interface RunningService {
  port: number;
  baseUrl: string;
  process: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  stop(): Promise<void>;
}

/** A variable the vitest global setup provides (the run's database, NATS, secrets). */
export function requireEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (the vitest global setup provides it)`);
  return value;
}

/**
 * Spawns a compiled service (`main`: its dist/src/main.js) on a free port with the test run's
 * Postgres, NATS and mesh secret (plus `env`), and waits, with a deadline, until
 * grpc.health.v1.Health/Check says SERVING; fails at once, with the output, if it exits first.
 */
export async function startService(main: string, options: { env?: Record<string, string>; healthTimeoutMs?: number } = {}): Promise<RunningService> {
  const port = await freePort();
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: requireEnv('DATABASE_URL'),
    NATS_URL: requireEnv('NATS_URL'),
    SWITCHBOARD_MESH_SECRET: requireEnv('SWITCHBOARD_MESH_SECRET'),
    SWITCHBOARD_DATA_KEYS: requireEnv('SWITCHBOARD_DATA_KEYS'),
    EVENTS_SUBJECT_PREFIX: requireEnv('EVENTS_SUBJECT_PREFIX'),
    EVENTS_STREAM: requireEnv('EVENTS_STREAM'),
    WORK_SUBJECT_PREFIX: requireEnv('WORK_SUBJECT_PREFIX'),
    WORK_STREAM: requireEnv('WORK_STREAM'),
    PORT: String(port),
    LOG_LEVEL: 'debug',
    ...options.env,
  };
  const child = spawn(process.execPath, [main], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const collect = (chunk: Buffer) => {
    output += chunk.toString('utf8');
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };

  const baseUrl = `http://127.0.0.1:${port}`;
  const health = createClient(Health, createConnectTransport({ baseUrl, httpVersion: '1.1' }));
  try {
    await Promise.race([
      exited.then(() => Promise.reject(new Error(`${main} exited with code ${child.exitCode} before it was healthy`))),
      eventually(
        async () => (await health.check({}, { timeoutMs: 1000 })).status === HealthCheckResponse_ServingStatus.SERVING,
        `${main} to report SERVING`,
        options.healthTimeoutMs ?? 30_000,
        100,
      ),
    ]);
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}\n--- output ---\n${output}`);
  }
  return { port, baseUrl, process: child, output: () => output, stop };
}

/**
 * A Connect client of `service` at `baseUrl` whose calls carry a mesh token for `audience` with
 * `claims` (none when `claims` is null), signed with the test run's mesh secret or `meshSecret`.
 */
export function meshClient<T extends DescService>(
  service: T,
  baseUrl: string,
  audience: string,
  claims: MeshClaims | null = { caller: 'gateway' },
  options: { httpVersion?: '1.1' | '2'; meshSecret?: string } = {},
): Client<T> {
  const tokens = new MeshTokens(options.meshSecret ?? requireEnv('SWITCHBOARD_MESH_SECRET'));
  const addToken: Interceptor = (next) => async (req) => {
    if (claims) req.header.set('authorization', `Bearer ${await tokens.mint(audience, claims)}`);
    return next(req);
  };
  return createClient(service, createConnectTransport({ baseUrl, httpVersion: options.httpVersion ?? '1.1', interceptors: [addToken] }));
}

/** The Connect code a call ends with (`ok` when it succeeds), to assert access rules compactly. */
export function outcomeOf(call: Promise<unknown>): Promise<string> {
  return call.then(
    () => 'ok',
    (err: unknown) => Code[ConnectError.from(err).code],
  );
}

/** Mesh-token claims of a signed-in user acting in a test workspace with `role`. */
export function memberClaims(role: string): MeshClaims {
  return { caller: 'gateway', principalId: 'usr_test', principalType: 'user', workspaceId: 'org_test', role };
}

/** One compiled service for a test file: start it in beforeAll, stop it in afterAll. */
export class ServiceUnderTest {
  private running?: RunningService;

  constructor(
    private readonly main: URL,
    /** The audience of its mesh tokens: the service's name. */
    private readonly audience: string,
  ) {}

  async start(options?: Parameters<typeof startService>[1]): Promise<RunningService> {
    this.running = await startService(fileURLToPath(this.main), options);
    return this.running;
  }

  stop(): Promise<void> {
    return this.running?.stop() ?? Promise.resolve();
  }

  /** A client whose calls carry `claims` (no mesh token when null). */
  client<T extends DescService>(service: T, claims: MeshClaims | null): Client<T> {
    if (!this.running) throw new Error('the service is not started');
    return meshClient(service, this.running.baseUrl, this.audience, claims);
  }
}
