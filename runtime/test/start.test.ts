import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoRoot } from '@switchboard/runtime/dev/mesh';
import { freePort } from '@switchboard/runtime/infra';
import { eventually } from '@switchboard/runtime/testing';
import { beforeAll, describe, expect, it } from 'vitest';

/**
 * `npm start` as a user runs it: it refuses a busy port and an unreachable database at once with
 * a message naming them, a component that dies stops the mesh with a non-zero exit, and stopping
 * npm by its PID (SIGTERM) leaves no component behind.
 */

const startScript = path.join(repoRoot, 'runtime/dist/src/dev/start.js');

interface Run {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

async function run(command: string, args: string[], env: Record<string, string>): Promise<Run> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'switchboard-start-'));
  // As a user's shell runs it: without vitest's NODE_ENV=test, which would make `npm start`'s
  // build of the dashboard a development bundle in the checkout other files test.
  const { NODE_ENV: _vitest, ...userEnv } = process.env;
  const child = spawn(command, args, {
    cwd: repoRoot,
    env: { ...userEnv, SWITCHBOARD_DATA_DIR: dataDir, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  for (const stream of [child.stdout!, child.stderr!]) stream.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

/** Components of meshes other files may still be stopping: never counted as ours. */
const others = new Set<number>();

/** The PIDs of running mesh components (their entry points), from /proc, but `others`. */
function componentPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (cmdline.includes(repoRoot) || cmdline.includes('dist/src/main.js')) {
        if (/(services\/\w+|gateway|data-plane)\/dist\/src\/main\.js/.test(cmdline) && !others.has(Number(entry))) pids.push(Number(entry));
      }
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

const deadline = <T>(promise: Promise<T>, ms: number, what: string) =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms))]);

describe('npm start', () => {
  beforeAll(() => {
    for (const pid of componentPids()) others.add(pid);
  });

  it('refuses a port another process holds at once, naming it', async () => {
    const port = await freePort();
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(port, '0.0.0.0', resolve));
    try {
      const started = await run(process.execPath, [startScript], { PORT: String(port) });
      expect(await deadline(started.exited, 15_000, 'the refusal')).toBe(1);
      expect(started.output()).toContain(`port ${port} (gateway) is already in use`);
      expect(componentPids()).toEqual([]);
    } finally {
      holder.close();
    }
  });

  it('names Postgres and DATABASE_URL when the database is unreachable', async () => {
    const started = await run(process.execPath, [startScript], {
      DATABASE_URL: `postgres://postgres:secret@127.0.0.1:${await freePort()}/switchboard`,
      PORT: String(await freePort()),
    });
    expect(await deadline(started.exited, 15_000, 'the refusal')).toBe(1);
    expect(started.output()).toMatch(/Postgres is not reachable at 127\.0\.0\.1:\d+ \(DATABASE_URL=postgres:\/\/postgres:\*\*\*@/);
    expect(started.output()).not.toContain('secret');
  });

  it('stops with a non-zero exit when a component dies, and leaves nothing behind after SIGTERM to npm', async () => {
    // A component killed after ready stops the whole mesh, non-zero.
    const first = await run(process.execPath, [startScript], { OVERSEAS_API_KEY: '', CN_API_KEY: '' });
    await eventually(async () => (first.output().includes('Switchboard is ready') ? true : undefined), 'the first start', 60_000, 100);
    // Without a provider key, the demo upstream answers (DEMO_UPSTREAM, set by npm start).
    expect(first.output()).toContain('the demo upstream answers overseas and cn');
    const pids = componentPids();
    expect(pids).toHaveLength(7);
    const keys = pids.find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('services/keys/'))!;
    process.kill(keys, 'SIGKILL');
    expect(await deadline(first.exited, 20_000, 'the mesh stopping')).toBe(1);
    expect(first.output()).toContain('keys stopped unexpectedly');
    await eventually(async () => (componentPids().length === 0 ? true : undefined), 'no component left', 10_000, 100);

    // `npm start` stopped by PID: npm, then node, then every component.
    const second = await run('npm', ['start', '--silent'], {});
    await eventually(async () => (second.output().includes('Switchboard is ready') ? true : undefined), 'the second start', 90_000, 100);
    expect(componentPids()).toHaveLength(7);
    second.child.kill('SIGTERM');
    await eventually(async () => (componentPids().length === 0 ? true : undefined), 'no component left after SIGTERM', 10_000, 100);
    await deadline(second.exited, 10_000, 'npm exiting');
  }, 150_000);
});
