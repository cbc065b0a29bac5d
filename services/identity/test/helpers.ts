import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DescService } from '@bufbuild/protobuf';
import { type Client, createClient, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Health, HealthCheckResponse_ServingStatus } from '@switchboard/contracts/grpc/health/v1/health_pb';
import { freePort } from '@switchboard/runtime/infra';
import { type MeshClaims, MeshTokens } from '@switchboard/runtime/mesh-token';
import { eventually } from '@switchboard/runtime/testing';

export { eventually };

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const identityMain = path.join(repoRoot, 'services/identity/dist/src/main.js');

export function requireEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (the vitest global setup provides it)`);
  return value;
}

export interface RunningIdentity {
  port: number;
  baseUrl: string;
  mailboxDir: string;
  process: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Spawns the compiled identity service on a free port with the test run's Postgres, NATS and
 * mesh secret, and waits (with a deadline) until grpc.health.v1.Health/Check says SERVING.
 */
export async function startIdentity(options: { env?: Record<string, string>; healthTimeoutMs?: number } = {}): Promise<RunningIdentity> {
  const port = await freePort();
  const mailboxDir = await mkdtemp(path.join(tmpdir(), 'identity-mailbox-'));
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: requireEnv('DATABASE_URL'),
    NATS_URL: requireEnv('NATS_URL'),
    SWITCHBOARD_MESH_SECRET: requireEnv('SWITCHBOARD_MESH_SECRET'),
    EVENTS_SUBJECT_PREFIX: requireEnv('EVENTS_SUBJECT_PREFIX'),
    EVENTS_STREAM: requireEnv('EVENTS_STREAM'),
    PORT: String(port),
    MAILBOX_DIR: mailboxDir,
    LOG_LEVEL: 'debug',
    ...options.env,
  };
  const child = spawn(process.execPath, [identityMain], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    await rm(mailboxDir, { recursive: true, force: true });
  };

  const baseUrl = `http://127.0.0.1:${port}`;
  const health = createClient(Health, createConnectTransport({ baseUrl, httpVersion: '1.1' }));
  const timeoutMs = options.healthTimeoutMs ?? 30_000;
  try {
    // Fails at once when the process exits; otherwise polls health until the deadline.
    await Promise.race([
      exited.then(() => Promise.reject(new Error(`identity exited with code ${child.exitCode} before it was healthy`))),
      eventually(
        async () => {
          const response = await health.check({}, { timeoutMs: 1000 });
          return response.status === HealthCheckResponse_ServingStatus.SERVING ? true : undefined;
        },
        'identity to report SERVING',
        timeoutMs,
        100,
      ),
    ]);
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}\n--- identity output ---\n${output}`);
  }
  return { port, baseUrl, mailboxDir, process: child, output: () => output, stop };
}

const meshTokens = () => new MeshTokens(requireEnv('SWITCHBOARD_MESH_SECRET'));

/** A Connect client whose calls carry a mesh token with `claims` (none when `claims` is null). */
export function meshClient<T extends DescService>(service: T, baseUrl: string, claims: MeshClaims | null = { caller: 'gateway' }): Client<T> {
  const tokens = meshTokens();
  const addToken: Interceptor = (next) => async (req) => {
    if (claims) req.header.set('authorization', `Bearer ${await tokens.mint('identity', claims)}`);
    return next(req);
  };
  return createClient(service, createConnectTransport({ baseUrl, httpVersion: '1.1', interceptors: [addToken] }));
}

export function mintMeshToken(audience: string, claims: MeshClaims): Promise<string> {
  return meshTokens().mint(audience, claims);
}

/** A unique address for one test. */
export function uniqueEmail(tag = 'user'): string {
  return `${tag}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}@example.com`;
}

export interface MailFile {
  name: string;
  text: string;
  headers: Record<string, string>;
  body: string;
}

/** The mails in `dir` addressed to `to`, oldest first. */
export async function mailsTo(dir: string, to: string): Promise<MailFile[]> {
  const names = (await readdir(dir)).filter((name) => name.endsWith('.eml')).sort();
  const mails: MailFile[] = [];
  for (const name of names) {
    const text = await readFile(path.join(dir, name), 'utf8');
    const split = text.indexOf('\r\n\r\n');
    const headers: Record<string, string> = {};
    for (const line of text.slice(0, split).split('\r\n')) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    if (headers.to === to) mails.push({ name, text, headers, body: text.slice(split + 4) });
  }
  return mails;
}
