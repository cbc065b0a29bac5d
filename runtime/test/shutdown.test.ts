import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { repoRoot } from '@switchboard/runtime/dev/mesh';
import { eventually } from '@switchboard/runtime/testing';
import { describe, expect, it } from 'vitest';

/**
 * A component whose runner dies (`kill -9` of `npm start`) stops by itself: its IPC channel
 * closes, and so do its stdout and stderr, whose reader was the runner. Its logger must not
 * hold the exit (docs/decisions.md#a-dead-runner-and-the-logs).
 */

const dist = (file: string) => pathToFileURL(path.join(repoRoot, 'runtime/dist/src', file)).href;

/** A component as the runtime makes one: a logger, stopGracefully, phases as quick as the gateway's. */
const component = `
import { createLogger } from ${JSON.stringify(dist('log.js'))};
import { stopGracefully } from ${JSON.stringify(dist('shutdown.js'))};
const log = createLogger('orphan');
stopGracefully(log, { unready() {}, async drain() {}, async release() {} });
setInterval(() => undefined, 60_000);
log.info('ready');
`;

/** A runner as mesh.ts spawns a component: stdout and stderr piped to it, an IPC channel; it prints the component's PID. */
const runner = `
import { spawn } from 'node:child_process';
const child = spawn(process.execPath, ['--input-type=module', '-e', ${JSON.stringify(component)}], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], detached: true });
child.stdout.on('data', (chunk) => { if (String(chunk).includes('"msg":"ready"')) console.log(JSON.stringify({ pid: child.pid })); });
child.stderr.on('data', (chunk) => process.stderr.write(chunk));
`;

/** Whether a process runs (a zombie nobody reaped yet counts as gone). */
function running(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}

describe('stopGracefully', () => {
  it('stops a component whose runner was killed, though its stdout has no reader any more', async () => {
    const parent = spawn(process.execPath, ['--input-type=module', '-e', runner], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    for (const stream of [parent.stdout, parent.stderr]) stream.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const pid = await eventually(
      () => (JSON.parse(output.split('\n').find((line) => line.startsWith('{"pid"')) ?? 'null') as { pid: number } | null)?.pid,
      'the component to start',
      10_000,
    );
    try {
      parent.kill('SIGKILL');
      // The shutdown itself takes a few ms; before the fix, the exit spun forever in the logger.
      await eventually(() => !running(pid), `the component (PID ${pid}) to exit once its runner was killed`, 5000, 50);
    } finally {
      if (running(pid)) process.kill(pid, 'SIGKILL');
    }
    expect(running(pid)).toBe(false);
  });
});
