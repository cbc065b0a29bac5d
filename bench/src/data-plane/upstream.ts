import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** The upstream process (upstream-child.ts): its base URL and pid, the calls it got so far. */
export interface UpstreamProcess {
  baseUrl: string;
  pid: number | undefined;
  calls(): Promise<number>;
  stop(): Promise<void>;
}

export async function startUpstreamProcess(nodeFlags: string[]): Promise<UpstreamProcess> {
  const child: ChildProcess = spawn(process.execPath, [...nodeFlags, fileURLToPath(new URL('./upstream-child.js', import.meta.url))], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! });
  const waiting: Array<(line: string) => void> = [];
  lines.on('line', (line) => waiting.shift()?.(line));
  const nextLine = (timeoutMs: number) =>
    new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the upstream process did not answer')), timeoutMs);
      waiting.push((line) => {
        clearTimeout(timer);
        resolve(line);
      });
    });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const { baseUrl } = JSON.parse(await nextLine(15_000)) as { baseUrl: string };
  return {
    baseUrl,
    pid: child.pid,
    async calls() {
      const answer = nextLine(5_000);
      child.stdin!.write('count\n');
      return (JSON.parse(await answer) as { calls: number }).calls;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.stdin!.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}
