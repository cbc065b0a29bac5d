import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { bootMesh, newUser } from '@switchboard/testkit/mesh';
import { Webhook } from 'standardwebhooks';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwitchboardClient } from '../src/index.js';

/**
 * The SDK as a user gets it: `npm pack`, the tarball installed offline (from npm's cache) in an
 * empty folder outside the repository, and the README's examples, each a module of its own,
 * type-checked against the installed declarations and run there with node against a booted mesh
 * (the demo upstream answers the front door).
 */

const run = promisify(execFile);
const sdkDir = fileURLToPath(new URL('..', import.meta.url));
const repoRoot = path.resolve(sdkDir, '..');

/** The README's ```ts blocks, in order. */
const blocks = (await readFile(path.join(sdkDir, 'README.md'), 'utf8'))
  .split(/^```ts\n/m)
  .slice(1)
  .map((block) => block.slice(0, block.indexOf('\n```')));
/** The block that contains `marker` (each test names the example it runs). */
const block = (marker: string) => {
  const found = blocks.filter((text) => text.includes(marker));
  if (found.length !== 1) throw new Error(`expected one README block with ${marker}, found ${found.length}`);
  return blocks.indexOf(found[0]);
};
const examples = {
  createKey: block('sb.keys.create({ name:'),
  savedSession: block("readFile('session.json'"),
  lists: block('sb.keys.list({ limit: 50 })'),
  frontDoor: block('stream: true'),
  paymentRequired: block('SpendCapExceededError'),
  retries: block('idempotencyKey: `report-'),
  webhook: block('verifyWebhook(Buffer.concat'),
  rateLimited: block('RateLimitError'),
};

let mesh: Mesh;
let dir: string;
const user = newUser();
let env: Record<string, string>;

beforeAll(async () => {
  mesh = await bootMesh({ DEMO_UPSTREAM: 'true', OVERSEAS_API_KEY: '', CN_API_KEY: '' });
  dir = await mkdtemp(path.join(tmpdir(), 'switchboard-sdk-user-'));
  // prepack builds the SDK first, so the tarball holds what the sources say.
  await run('npm', ['pack', '--pack-destination', dir], { cwd: sdkDir });
  await writeFile(path.join(dir, 'package.json'), JSON.stringify({ name: 'sdk-user', private: true, type: 'module' }));
  // Offline: npm's cache holds the dependencies' tarballs but not their registry metadata, so
  // each dependency is packed from the repository's node_modules, at the exact version the SDK
  // pins, and installed beside the SDK's tarball.
  const { dependencies } = JSON.parse(await readFile(path.join(sdkDir, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  for (const [name, version] of Object.entries(dependencies)) {
    const installed = path.join(repoRoot, 'node_modules', name);
    expect(JSON.parse(await readFile(path.join(installed, 'package.json'), 'utf8')).version).toBe(version);
    await run('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], { cwd: installed });
  }
  const tarballs = (await readdir(dir)).filter((name) => name.endsWith('.tgz')).map((name) => `./${name}`);
  await run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', ...tarballs], { cwd: dir });
  await createSwitchboardClient({ baseUrl: mesh.gatewayUrl }).auth.register(user);
  env = { SWITCHBOARD_BASE_URL: mesh.gatewayUrl, SWITCHBOARD_EMAIL: user.email, SWITCHBOARD_PASSWORD: user.password };
  // Each example is a file of its own in the folder, as a user would save it.
  for (const [index, text] of blocks.entries()) {
    await writeFile(path.join(dir, `example-${index}.ts`), text);
    await writeFile(
      path.join(dir, `example-${index}.mjs`),
      ts.transpileModule(text, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText,
    );
  }
}, 300_000);

afterAll(async () => {
  await mesh?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Runs example `index` with node in the user's folder. */
async function runExample(index: number, extra: Record<string, string> = {}): Promise<string> {
  const { stdout } = await run(process.execPath, [`example-${index}.mjs`], { cwd: dir, env: { ...process.env, ...env, ...extra }, timeout: 60_000 });
  return stdout;
}

describe('the packed SDK', () => {
  it('is a publishable package of ESM with types, and nothing else', async () => {
    const manifest = JSON.parse(await readFile(path.join(dir, 'node_modules/@switchboard/sdk/package.json'), 'utf8'));
    expect(manifest.private).toBeUndefined();
    expect(manifest.type).toBe('module');
    const { stdout } = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: sdkDir });
    const files = (JSON.parse(stdout) as Array<{ files: Array<{ path: string }> }>)[0].files.map((file) => file.path);
    expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md', 'openapi.json', 'dist/src/index.js', 'dist/src/index.d.ts', 'src/index.ts']));
    expect(files.filter((file) => file.includes('test'))).toEqual([]);
  });

  it("type-checks the README's examples against the installed declarations", async () => {
    await writeFile(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          target: 'ES2022',
          lib: ['ES2023'],
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: ['node'],
          typeRoots: [path.join(repoRoot, 'node_modules/@types')],
        },
        include: ['example-*.ts'],
      }),
    );
    const tsc = path.join(repoRoot, 'node_modules/typescript/bin/tsc');
    const outcome = await run(process.execPath, [tsc, '-p', dir]).then(
      () => '',
      (err: { stdout: string }) => err.stdout,
    );
    expect(outcome).toBe('');
  });

  it('signs in, creates a key, and resumes the saved session (README: create a key)', async () => {
    expect(await runExample(examples.createKey)).toMatch(/^created key_\w+ \(sb_…\w+\), cap 25\.00 USD$/m);
    expect(await runExample(examples.savedSession)).toContain(`signed in as ${user.email}, personal workspace org_`);
    env.SWITCHBOARD_API_KEY = (await readFile(path.join(dir, 'key.txt'), 'utf8')).trim();
    expect(env.SWITCHBOARD_API_KEY).toMatch(/^sb_/);
  });

  it('iterates the keys (README: lists)', async () => {
    const stdout = await runExample(examples.lists);
    expect(stdout).toMatch(/^key_\w+ backend active 0/m);
    expect(stdout).toContain('0 revoked key(s) on the first page; more: false');
  });

  it('calls the front door, streamed and not, and rates the answer (README: the front door)', async () => {
    const stdout = await runExample(examples.frontDoor);
    expect(stdout.match(/This is Switchboard's demo upstream/g)).toHaveLength(2);
    expect(stdout).toMatch(/^cost 0\.\d+ USD on \S+$/m);
    expect(stdout).toMatch(/^streamed generation gen_\w+$/m);
  });

  it('handles a 402 of a key whose cap is reached (README: errors)', async () => {
    const owner = createSwitchboardClient({ baseUrl: mesh.gatewayUrl });
    await owner.auth.login({ email: user.email, password: user.password });
    const capped = await owner.keys.create({ name: 'capped', monthly_spend_cap_usd: '0' });
    const stdout = await runExample(examples.paymentRequired, { SWITCHBOARD_API_KEY: capped.full_key! });
    expect(stdout).toMatch(/^the key's month limit of 0 USD is reached; it resets at \d{4}-\d\d-01T00:00:00/m);
  });

  it('makes one conversation of two calls with one Idempotency-Key (README: retries; needs the gateway’s Idempotency-Key)', async () => {
    expect(await runExample(examples.retries)).toBe('one conversation\n');
  });

  it('verifies a signed delivery and refuses a forged one (README: verify a webhook)', async () => {
    const port = await freePort();
    const secret = `whsec_${Buffer.from('a webhook secret of 32 bytes....').toString('base64')}`;
    const receiver: ChildProcess = spawn(process.execPath, [`example-${examples.webhook}.mjs`], {
      cwd: dir,
      env: { ...process.env, SWITCHBOARD_WEBHOOK_SECRET: secret, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    const listening = new Promise<void>((resolve, reject) => {
      receiver.stdout?.on('data', (chunk) => {
        stdout += chunk;
        if (stdout.startsWith('listening\n')) resolve();
      });
      receiver.once('exit', (code) => reject(new Error(`the receiver exited (${code})`)));
    });
    try {
      const body = JSON.stringify({ type: 'webhook.test', timestamp: new Date().toISOString(), data: {} });
      const headers = (signingSecret: string) => {
        const at = new Date();
        return {
          'content-type': 'application/json',
          'webhook-id': 'dlv_readme',
          'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
          'webhook-signature': new Webhook(signingSecret).sign('dlv_readme', at, body),
        };
      };
      const deliver = async (signingSecret: string) =>
        (await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: headers(signingSecret), body })).status;
      await listening;
      expect(await deliver(secret)).toBe(204);
      expect(await deliver(`whsec_${Buffer.from('another secret').toString('base64')}`)).toBe(400);
      expect(stdout).toBe('listening\nverified webhook.test dlv_readme\n');
    } finally {
      receiver.kill();
    }
  });

  it('handles a 429 after five wrong passwords (README: errors)', async () => {
    const outputs: string[] = [];
    for (let attempt = 0; attempt < 6; attempt++) outputs.push(await runExample(examples.rateLimited));
    expect(outputs.slice(0, 5)).toEqual(Array(5).fill('refused (invalid_credentials)\n'));
    expect(outputs[5]).toMatch(/^throttled \(too_many_attempts\): try again in \d+ s\n$/);
  });

  it('runs every example of the README', () => {
    expect(new Set(Object.values(examples)).size).toBe(blocks.length);
  });
});

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}
