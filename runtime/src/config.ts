import { nkeys } from '@nats-io/transport-node';
import { componentNames, isComponentName } from '@switchboard/contracts/components';
import { MeshKeyring } from './mesh-token.js';
import { DataKeyRing, SecretError } from './secrets.js';

/** Configuration from the environment, with errors that name the variable and what it wants. */
export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

export function readString(name: string, fallback?: string, env: Env = process.env): string {
  const value = env[name];
  if (value !== undefined && value !== '') return value;
  if (fallback !== undefined) return fallback;
  throw new ConfigError(`${name} is required but not set`);
}

/** An integer setting; below `min` (e.g. 1 for a concurrency, where 0 would stall) stops the start. */
export function readInt(name: string, fallback: number, env: Env = process.env, min = 0): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a non-negative integer, got "${raw}"`);
  const value = Number(raw);
  if (value < min) throw new ConfigError(`${name} must be at least ${min}, got ${value}`);
  return value;
}

export function readBool(name: string, fallback: boolean, env: Env = process.env): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

const durationUnits: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses "250ms", "5s", "30m", "2h", "30d" into milliseconds. */
export function parseDuration(raw: string): number {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(raw.trim());
  if (!match) throw new ConfigError(`"${raw}" is not a duration (use e.g. 250ms, 5s, 30m, 2h, 30d)`);
  return Number(match[1]) * durationUnits[match[2]];
}

/** A duration setting in milliseconds; below `minMs` (e.g. a period of 0, a loop) stops the start. */
export function readDuration(name: string, fallback: string, env: Env = process.env, minMs = 0): number {
  const raw = env[name] || fallback;
  let ms: number;
  try {
    ms = parseDuration(raw);
  } catch (err) {
    throw new ConfigError(`${name}: ${(err as Error).message}`);
  }
  if (ms < minMs) throw new ConfigError(`${name} must be at least ${minMs} ms, got "${raw}"`);
  return ms;
}

/**
 * Where a peer service answers: `<NAME>_URL`, else localhost on its default port. The names and
 * ports come from the caller (the contracts package lists the components: contracts/src/components.ts).
 */
export function serviceUrl(name: string, defaultPort: number, env: Env = process.env): string {
  return readString(`${name.toUpperCase()}_URL`, `http://127.0.0.1:${defaultPort}`, env);
}

/** Settings every process of the mesh shares. */
export interface CommonConfig {
  databaseUrl: string;
  natsUrl: string;
  /** NATS_NKEY_SEED: the NKey user seed this process authenticates with; none on an open NATS (docs/operations.md#nats-credentials). */
  natsSeed?: string;
  /**
   * SWITCHBOARD_MESH_SECRET, if set: the shared mesh key of every component without one of its own
   * (readMeshKeyring), and the key of data encrypted before data keys existed.
   */
  meshSecret?: string;
  /** The keys that encrypt data at rest (SWITCHBOARD_DATA_KEYS). */
  dataKeys: DataKeyRing;
  logLevel: string;
  eventsSubjectPrefix: string;
  eventsStream: string;
  /** Where data planes put usage and exchanges (docs/money-path.md#usage): the subject prefix and the stream. */
  workSubjectPrefix: string;
  workStream: string;
  /**
   * BATCH_LINGER: how long a consumer of a busy subject (usage, its events, exchanges) waits to
   * fill a batch after its first message: fewer transactions, a settlement later by as much.
   */
  batchLingerMs: number;
}

/** A required secret of at least 32 bytes, named by its variable (docs/operations.md#secrets). */
export function readSecret(name: string, env: Env = process.env): string {
  const secret = readString(name, undefined, env);
  if (Buffer.byteLength(secret) < 32) throw new ConfigError(`${name} must be at least 32 bytes`);
  return secret;
}

/** SWITCHBOARD_MESH_SECRET, at least 32 bytes (docs/api/internal-calls.md#mesh-tokens), if set. */
export function readMeshSecret(env: Env = process.env): string | undefined {
  return env.SWITCHBOARD_MESH_SECRET ? readSecret('SWITCHBOARD_MESH_SECRET', env) : undefined;
}

/** SWITCHBOARD_MESH_SECRET_PREVIOUS: the secret being rotated out, if any (at least 32 bytes too). */
export function readPreviousMeshSecret(env: Env = process.env): string | undefined {
  const previous = env.SWITCHBOARD_MESH_SECRET_PREVIOUS;
  if (previous === undefined || previous === '') return undefined;
  if (Buffer.byteLength(previous) < 32) throw new ConfigError('SWITCHBOARD_MESH_SECRET_PREVIOUS must be at least 32 bytes');
  return previous;
}

/**
 * The mesh keys of `component`'s process (docs/api/internal-calls.md#mesh-keys):
 * SWITCHBOARD_MESH_KEYS, `component:secret` entries (comma-separated; a component's first entry is
 * its current key, later ones previous keys still accepted), and SWITCHBOARD_MESH_SECRET (+
 * _PREVIOUS) for every component without entries. `component` must be able to sign.
 */
export function readMeshKeyring(component: string, env: Env = process.env): MeshKeyring {
  const components = new Map<string, string[]>();
  const raw = env.SWITCHBOARD_MESH_KEYS ?? '';
  for (const [index, entry] of raw.split(',').entries()) {
    if (entry.trim() === '') continue;
    const colon = entry.indexOf(':');
    const name = colon > 0 ? entry.slice(0, colon).trim() : '';
    // Never echo the entry: it holds a secret.
    if (!isComponentName(name))
      throw new ConfigError(
        `SWITCHBOARD_MESH_KEYS entry ${index + 1} must be component:secret with a component among ${componentNames.join(', ')}${name ? `, got "${name}"` : ''}`,
      );
    const secret = entry.slice(colon + 1).trim();
    if (Buffer.byteLength(secret) < 32) throw new ConfigError(`SWITCHBOARD_MESH_KEYS: the key of ${name} (entry ${index + 1}) must be at least 32 bytes`);
    components.set(name, [...(components.get(name) ?? []), secret]);
  }
  const keyring = new MeshKeyring({ components, secret: readMeshSecret(env), previousSecret: readPreviousMeshSecret(env) });
  if (!keyring.signs(component))
    throw new ConfigError(`SWITCHBOARD_MESH_SECRET is required, or SWITCHBOARD_MESH_KEYS with an entry for ${component} (component:secret, at least 32 bytes)`);
  return keyring;
}

/**
 * SWITCHBOARD_DATA_KEYS: `id:base64-of-32-bytes[,…]`, the first key encrypts, all decrypt. It is
 * required: `npm start` generates one per data dir, production sets it from a Secret.
 */
export function readDataKeys(env: Env = process.env): DataKeyRing {
  const raw = env.SWITCHBOARD_DATA_KEYS;
  if (raw === undefined || raw.trim() === '') {
    throw new ConfigError(
      'SWITCHBOARD_DATA_KEYS is required: a comma-separated list of id:base64 keys of 32 bytes (the first encrypts, all decrypt), e.g. ' +
        `k1:$(node -e "console.log(require('crypto').randomBytes(32).toString('base64'))")`,
    );
  }
  try {
    return DataKeyRing.parse(raw, 'SWITCHBOARD_DATA_KEYS');
  } catch (err) {
    if (err instanceof SecretError) throw new ConfigError(err.message);
    throw err;
  }
}

/** A namespace is one NATS subject token: lower case, so its stream names (upper case) stay distinct. */
const namespacePattern = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/**
 * SWITCHBOARD_NAMESPACE (default `switchboard`): the prefix of every NATS subject and stream of
 * one deployment, so two deployments (two checkouts, staging and production) on one NATS never
 * see each other's events (docs/decisions.md#namespaces-and-ports).
 */
export function readNamespace(env: Env = process.env): string {
  const namespace = readString('SWITCHBOARD_NAMESPACE', 'switchboard', env);
  if (!namespacePattern.test(namespace)) {
    throw new ConfigError(
      `SWITCHBOARD_NAMESPACE must be lower-case letters, digits, "_" or "-" (at most 64, starting with a letter or digit), got "${namespace}"`,
    );
  }
  return namespace;
}

/** The namespace a name gives (`npm start`'s database name): lower-cased, what a subject token cannot hold turned into `_`. */
export function namespaceOf(name: string): string {
  const namespace = name
    .toLowerCase()
    .replace(/[^a-z0-9_-]/g, '_')
    .replace(/^[_-]+/, '')
    .slice(0, 64);
  return namespace || 'switchboard';
}

/** NATS_NKEY_SEED, if set: an NKey user seed (`SU…`), checked at start so a pasted public key or a truncated seed is named at once. */
export function readNatsSeed(env: Env = process.env): string | undefined {
  const seed = env.NATS_NKEY_SEED?.trim();
  if (seed === undefined || seed === '') return undefined;
  try {
    if (nkeys.fromSeed(new TextEncoder().encode(seed)).getPublicKey().startsWith('U')) return seed;
  } catch {
    // Named below.
  }
  throw new ConfigError('NATS_NKEY_SEED must be an NKey user seed (SU…), as `npm run credentials` writes it (docs/operations.md#nats-credentials)');
}

/** Where events are: NATS, and the streams and subject prefixes of the namespace (each overridable alone). */
export function readEventsConfig(
  env: Env = process.env,
): Pick<CommonConfig, 'natsUrl' | 'natsSeed' | 'eventsSubjectPrefix' | 'eventsStream' | 'workSubjectPrefix' | 'workStream' | 'batchLingerMs'> {
  const namespace = readNamespace(env);
  // Upper-casing keeps distinct namespaces distinct (`a-b` and `a_b` get streams of their own).
  const streamPrefix = namespace.toUpperCase();
  return {
    natsUrl: readString('NATS_URL', 'nats://127.0.0.1:4222', env),
    natsSeed: readNatsSeed(env),
    eventsSubjectPrefix: readString('EVENTS_SUBJECT_PREFIX', `${namespace}.events`, env),
    eventsStream: readString('EVENTS_STREAM', `${streamPrefix}_EVENTS`, env),
    workSubjectPrefix: readString('WORK_SUBJECT_PREFIX', namespace, env),
    workStream: readString('WORK_STREAM', `${streamPrefix}_WORK`, env),
    batchLingerMs: readDuration('BATCH_LINGER', '50ms', env),
  };
}

export function readCommonConfig(env: Env = process.env): CommonConfig {
  return {
    databaseUrl: readString('DATABASE_URL', undefined, env),
    meshSecret: readMeshSecret(env),
    dataKeys: readDataKeys(env),
    logLevel: readString('LOG_LEVEL', 'info', env),
    ...readEventsConfig(env),
  };
}
