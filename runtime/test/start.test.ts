import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { meshComponents } from '@switchboard/contracts/components';
import { namespaceOf, readEventsConfig } from '@switchboard/runtime/config';
import { repoRoot } from '@switchboard/runtime/dev/mesh';
import { newId } from '@switchboard/runtime/ids';
import { dropDatabase, freePort } from '@switchboard/runtime/infra';
import { buildEventPayload } from '@switchboard/runtime/outbox';
import { eventually, requireEnv } from '@switchboard/runtime/testing';
import { describe, expect, it } from 'vitest';

/**
 * `npm start` as a user runs it: it refuses a busy port, a bad setting and an unreachable
 * database at once with a message naming them; two of them (two checkouts) run side by side on
 * one Postgres and one NATS and never see each other's events (docs/decisions.md#namespaces-and-ports);
 * a component that dies stops its mesh with a non-zero exit; stopping npm by its PID (SIGTERM)
 * leaves no component behind.
 */

const startScript = path.join(repoRoot, 'runtime/dist/src/dev/start.js');

/**
 * Free ports for every component of one `npm start` (the settings readMeshPorts reads), so the
 * test never depends on the default ports, some of which lie in Linux's ephemeral range.
 */
async function portSettings(): Promise<Record<string, string>> {
  const settings: Record<string, string> = {};
  for (const component of meshComponents) {
    settings[component.portVariable] = String(await freePort());
    settings[component.metricsPortVariable] = String(await freePort());
  }
  return settings;
}

interface Run {
  child: ChildProcess;
  dataDir: string;
  output: () => string;
  exited: Promise<number | null>;
}

async function run(command: string, args: string[], env: Record<string, string>): Promise<Run> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'switchboard-start-'));
  // As a user's shell runs it: without vitest's NODE_ENV=test, which would make `npm start`'s
  // build of the dashboard a development bundle in the checkout other files test, and without
  // the test run's private stream names, so the namespace alone decides them.
  const { NODE_ENV: _vitest, EVENTS_SUBJECT_PREFIX: _e, EVENTS_STREAM: _s, WORK_SUBJECT_PREFIX: _w, WORK_STREAM: _ws, ...userEnv } = process.env;
  const child = spawn(command, args, {
    cwd: repoRoot,
    env: { ...userEnv, SWITCHBOARD_DATA_DIR: dataDir, LOG_LEVEL: 'info', ...(await portSettings()), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  for (const stream of [child.stdout!, child.stderr!]) stream.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, dataDir, output: () => output, exited };
}

/** The PIDs of the running components (their entry points) of the `npm start` of `dataDir`, from /proc. */
function componentPids(dataDir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (!/(services\/\w+|gateway|data-plane)\/dist\/src\/main\.js/.test(cmdline)) continue;
      if (readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0').includes(`SWITCHBOARD_DATA_DIR=${dataDir}`)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

const deadline = <T>(promise: Promise<T>, ms: number, what: string) =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms))]);

/** A database beside the test run's, as a second checkout (or environment) has its own. */
function databaseBeside(suffix: string): string {
  const url = new URL(requireEnv('DATABASE_URL'));
  url.pathname = `${url.pathname}_${suffix}`;
  return url.toString();
}

/** JSON calls of one mesh's REST API. */
function api(gatewayUrl: string) {
  return async (method: string, pathname: string, body?: unknown, token?: string) => {
    const response = await fetch(`${gatewayUrl}${pathname}`, {
      method,
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // biome-ignore lint/suspicious/noExplicitAny: a test reads whatever JSON the route answers.
    const json: any = await response.json();
    if (!response.ok) throw new Error(`${method} ${pathname}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  };
}

/** A user of the mesh at `gatewayUrl` and a key of theirs. */
async function userWithKey(gatewayUrl: string) {
  const call = api(gatewayUrl);
  const unique = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  const registered = await call('POST', '/v1/auth/register', {
    email: `start${unique}@example.com`,
    password: `correct horse ${unique} staple`,
    full_name: 'Start Test',
  });
  const token: string = registered.session.access_token;
  const created = await call('POST', '/v1/keys', { name: 'side by side' }, token);
  return { call, token, workspaceId: registered.user.personal_workspace_id as string, keyId: created.key.key_id as string };
}

describe('npm start', () => {
  it('refuses a port another process holds at once, naming it and the setting that moves it', async () => {
    const port = await freePort();
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(port, '0.0.0.0', resolve));
    try {
      const started = await run(process.execPath, [startScript], { PORT: String(port) });
      expect(await deadline(started.exited, 15_000, 'the refusal')).toBe(1);
      expect(started.output()).toContain(`port ${port} (gateway) is already in use`);
      expect(started.output()).toContain('set PORT, or SWITCHBOARD_PORT_OFFSET');
      expect(componentPids(started.dataDir)).toEqual([]);
    } finally {
      holder.close();
    }
  });

  it('names a bad port setting', async () => {
    const started = await run(process.execPath, [startScript], { KEYS_PORT: 'eighty' });
    expect(await deadline(started.exited, 15_000, 'the refusal')).toBe(1);
    expect(started.output()).toContain('KEYS_PORT must be a non-negative integer');
  });

  it('names Postgres and DATABASE_URL when the database is unreachable', async () => {
    const started = await run(process.execPath, [startScript], {
      DATABASE_URL: `postgres://postgres:secret@127.0.0.1:${await freePort()}/switchboard`,
    });
    expect(await deadline(started.exited, 15_000, 'the refusal')).toBe(1);
    expect(started.output()).toMatch(/Postgres is not reachable at 127\.0\.0\.1:\d+ \(DATABASE_URL=postgres:\/\/postgres:\*\*\*@/);
    expect(started.output()).not.toContain('secret');
  });

  it('runs two meshes side by side on one Postgres and one NATS without crossing; a component that dies stops its mesh alone, and SIGTERM to npm leaves nothing behind', async () => {
    // Two checkouts as the README's recipe runs them: each its own database (its namespace) and ports.
    const databases = [databaseBeside('a'), databaseBeside('b')];
    const namespaces = databases.map((url) => namespaceOf(decodeURIComponent(new URL(url).pathname.slice(1))));
    const streams = namespaces.flatMap((namespace) => {
      const names = readEventsConfig({ SWITCHBOARD_NAMESPACE: namespace });
      return [names.eventsStream, names.workStream];
    });
    const nc = await connect({ servers: requireEnv('NATS_URL'), timeout: 5000 });
    try {
      const [a, b] = await Promise.all([
        run(process.execPath, [startScript], { DATABASE_URL: databases[0], OVERSEAS_API_KEY: '', CN_API_KEY: '' }),
        run('npm', ['start', '--silent'], { DATABASE_URL: databases[1] }),
      ]);
      // The runner's own line that says where the mesh is, and in which namespace.
      const readyOf = (started: Run, what: string) =>
        eventually(
          () =>
            started
              .output()
              .split('\n')
              .find((line) => line.includes('"msg":"Switchboard is ready"')),
          what,
          90_000,
          100,
        ).then((line) => JSON.parse(line) as { gateway: string; namespace: string });
      const [readyA, readyB] = await Promise.all([readyOf(a, 'mesh A to start'), readyOf(b, 'mesh B to start')]);
      expect([readyA.namespace, readyB.namespace]).toEqual(namespaces);
      const [gatewayA, gatewayB] = [readyA.gateway, readyB.gateway];
      // Without a provider key, the demo upstream answers (DEMO_UPSTREAM, set by npm start).
      expect(a.output()).toContain('the demo upstream answers overseas and cn');
      // Top-ups through the sandbox (BILLING_SANDBOX, set by npm start); new workspaces open at 0.
      expect(a.output()).toMatch(/"provider":"sandbox","opening_credit_usd":"0".*"msg":"billing prices loaded"/);
      expect(componentPids(a.dataDir)).toHaveLength(7);
      expect(componentPids(b.dataDir)).toHaveLength(7);

      // Everything each namespace carries from now on, as core NATS sees it.
      const seen: Record<string, string[]> = { a: [], b: [] };
      nc.subscribe(`${namespaces[0]}.>`, { callback: (_err, msg) => void seen.a.push(`${msg.subject} ${msg.string()}`) });
      nc.subscribe(`${namespaces[1]}.>`, { callback: (_err, msg) => void seen.b.push(`${msg.subject} ${msg.string()}`) });
      await nc.flush();

      // Mesh A: a key, usage billed to it (as billing publishes it), then its revocation.
      const userA = await userWithKey(gatewayA);
      /** Usage of 0.25 for `user`'s key billed in `namespace` (as billing publishes it), counted by that mesh. */
      const billUsage = async (user: typeof userA, namespace: string, what: string) => {
        const eventId = newId('evt');
        const usage = {
          usage_id: newId('usg'),
          generation_id: newId('gen'),
          key_id: user.keyId,
          workspace_id: user.workspaceId,
          model: 'service/fast',
          tier: 'fast',
          cost_usd: '0.25',
          input_tokens: '100',
          output_tokens: '50',
          occurred_at: new Date().toISOString(),
          balance_usd: '4.75',
        };
        const payload = buildEventPayload(eventId, { type: 'billing.usage.recorded', workspaceId: user.workspaceId, data: usage }, 'billing');
        await jetstream(nc).publish(`${namespace}.events.billing.usage.recorded`, JSON.stringify(payload), { msgID: eventId });
        await eventually(
          async () => (await user.call('GET', `/v1/keys/${user.keyId}`, undefined, user.token)).month_to_date_spend_usd === '0.25',
          what,
          20_000,
        );
      };
      await billUsage(userA, namespaces[0]!, 'mesh A to count the usage');
      await userA.call('DELETE', `/v1/keys/${userA.keyId}`, undefined, userA.token);

      // Mesh B, afterwards: its own key, then usage billed to it, which B counts: the last of B's events.
      const userB = await userWithKey(gatewayB);
      await billUsage(userB, namespaces[1]!, 'mesh B to count the usage');
      await eventually(() => seen.a.some((line) => line.includes('.events.key.revoked ')), 'mesh A to publish the revocation', 20_000);
      await eventually(() => seen.b.some((line) => line.includes('.events.key.created ') && line.includes(userB.keyId)), "mesh B's key event", 20_000);

      // Nothing of A reached B's subjects, nor B's consumers (keys warns of usage for a key it does not know).
      expect(seen.a.join('\n')).toContain(userA.keyId);
      expect(seen.b.join('\n')).not.toContain(userA.keyId);
      expect(seen.b.join('\n')).not.toContain(userA.workspaceId);
      expect(b.output()).not.toContain(userA.keyId);
      expect(b.output()).not.toContain('unknown key');
      // Nor anything of B A's, while A still runs: B's key and its usage stayed on B's subjects.
      expect(seen.b.join('\n')).toContain(userB.keyId);
      expect(seen.a.join('\n')).not.toContain(userB.keyId);
      expect(seen.a.join('\n')).not.toContain(userB.workspaceId);
      expect(a.output()).not.toContain(userB.keyId);
      expect(a.output()).not.toContain('unknown key');
      // Each stream holds its own namespace's subjects alone.
      const jsm = await jetstreamManager(nc);
      for (const [index, namespace] of namespaces.entries()) {
        const info = await jsm.streams.info(streams[index * 2], { subjects_filter: '>' });
        expect(Object.keys(info.state.subjects ?? {}).length).toBeGreaterThan(0);
        for (const subject of Object.keys(info.state.subjects ?? {})) expect(subject.startsWith(`${namespace}.events.`)).toBe(true);
      }

      // A component killed after ready stops its mesh, non-zero; the other runs on.
      const keys = componentPids(a.dataDir).find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('services/keys/'))!;
      process.kill(keys, 'SIGKILL');
      expect(await deadline(a.exited, 20_000, 'mesh A stopping')).toBe(1);
      expect(a.output()).toContain('keys stopped unexpectedly');
      await eventually(() => componentPids(a.dataDir).length === 0, 'no component of A left', 10_000, 100);
      expect(componentPids(b.dataDir)).toHaveLength(7);

      // `npm start` stopped by PID: npm, then node, then every component, without a warning.
      b.child.kill('SIGTERM');
      await eventually(() => componentPids(b.dataDir).length === 0, 'no component of B left after SIGTERM', 10_000, 100);
      await deadline(b.exited, 10_000, 'npm exiting');
      expect(b.output()).not.toMatch(/"level":(40|50|60)/);
    } finally {
      const jsm = await jetstreamManager(nc);
      for (const stream of streams) await jsm.streams.delete(stream).catch(() => false);
      await nc.close();
      for (const url of databases) await dropDatabase(url).catch(() => undefined);
    }
  }, 180_000);
});
