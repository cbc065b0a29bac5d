import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The single-process baseline server (baseline-server.ts) running as a child process. */
export interface BaselineServer {
  url: string;
  pid: number;
  /** Everything it printed (errors only: it does not log requests). */
  output(): string;
  exited(): boolean;
  stop(): Promise<void>;
}

const startTimeoutMs = 15_000;

export async function startBaselineServer(options: { databaseUrl: string; jwksUrl: string; poolMax: number }): Promise<BaselineServer> {
  const entry = fileURLToPath(new URL('./baseline-server.js', import.meta.url));
  const child: ChildProcess = fork(entry, [], {
    env: {
      ...process.env,
      BASELINE_DATABASE_URL: options.databaseUrl,
      BASELINE_JWKS_URL: options.jwksUrl,
      BASELINE_POOL_MAX: String(options.poolMax),
      NODE_ENV: 'production',
    },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const lines: string[] = [];
  for (const stream of [child.stdout!, child.stderr!]) {
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => lines.push(chunk));
  }
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  };
  try {
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the baseline server did not start within ${startTimeoutMs} ms`)), startTimeoutMs);
      child.on('message', (message: { type?: string; port?: number; message?: string }) => {
        if (message.type === 'ready' && message.port) {
          clearTimeout(timer);
          resolve(message.port);
        } else if (message.type === 'error') {
          clearTimeout(timer);
          reject(new Error(`the baseline server failed: ${message.message}`));
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`the baseline server exited with code ${code}: ${lines.join('').slice(-2000)}`));
      });
    });
    return {
      url: `http://127.0.0.1:${port}`,
      pid: child.pid!,
      output: () => lines.join(''),
      exited: () => child.exitCode !== null || child.signalCode !== null,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
