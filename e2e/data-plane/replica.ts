import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from '@switchboard/runtime/dev/mesh';
import { freePort } from '@switchboard/runtime/infra';
import { eventually } from '@switchboard/runtime/testing';
import OpenAI from 'openai';

/** The official client at a front door (the gateway's, or a data plane's own port); no retries, so every answer is seen. */
export const clientAt = (baseUrl: string, apiKey: string) => new OpenAI({ apiKey, baseURL: `${baseUrl}/v1`, maxRetries: 0 });

/** Another data-plane process on the mesh's peers, NATS and work stream, at its own port. */
export class Replica {
  private constructor(
    readonly url: string,
    private readonly child: ChildProcess,
    readonly output: () => string,
  ) {}

  static async start(env: Record<string, string>): Promise<Replica> {
    const port = await freePort();
    const child = spawn(process.execPath, [path.join(repoRoot, 'data-plane/dist/src/main.js')], {
      cwd: repoRoot,
      env: { ...process.env, ...env, PORT: String(port), METRICS_PORT: '0' },
      // The IPC channel: the process stops if this runner dies.
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    let output = '';
    for (const stream of [child.stdout, child.stderr]) stream?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const replica = new Replica(`http://127.0.0.1:${port}`, child, () => output);
    try {
      await eventually(
        async () => {
          if (child.exitCode !== null) throw new Error(`the second data plane exited ${child.exitCode}`);
          return (await fetch(`${replica.url}/healthz`, { signal: AbortSignal.timeout(1000) })).ok;
        },
        'the second data plane to be healthy',
        30_000,
        100,
      );
    } catch (err) {
      await replica.stop();
      throw new Error(`${(err as Error).message}\n${output.split('\n').slice(-20).join('\n')}`);
    }
    return replica;
  }

  client(apiKey: string): OpenAI {
    return clientAt(this.url, apiKey);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(timer);
  }
}
