import { nkeys } from '@nats-io/transport-node';
import { servicePorts } from '@switchboard/contracts/components';
import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  namespaceOf,
  parseDuration,
  readBool,
  readCommonConfig,
  readDuration,
  readEventsConfig,
  readInt,
  readMeshKeyring,
  readString,
  serviceUrl,
} from '../src/config.js';
import { DataKeyRing } from '../src/secrets.js';

/** Runs `read` and returns the ConfigError it throws (fails the test when it does not throw one). */
function configError(read: () => unknown): ConfigError {
  try {
    read();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError, but the value was accepted');
}

describe('readString', () => {
  it('takes the value, else the fallback, else names the missing variable', () => {
    expect(readString('A_VAR', 'dflt', { A_VAR: 'x' })).toBe('x');
    expect(readString('A_VAR', 'dflt', {})).toBe('dflt');
    expect(readString('A_VAR', 'dflt', { A_VAR: '' })).toBe('dflt');
    expect(configError(() => readString('A_VAR', undefined, {})).message).toContain('A_VAR');
    expect(configError(() => readString('A_VAR', undefined, { A_VAR: '' })).message).toContain('A_VAR');
  });
});

describe('readInt', () => {
  it('accepts non-negative integers and falls back when unset or empty', () => {
    expect(readInt('PORT', 8080, {})).toBe(8080);
    expect(readInt('PORT', 8080, { PORT: '' })).toBe(8080);
    expect(readInt('PORT', 8080, { PORT: '0' })).toBe(0);
    expect(readInt('PORT', 8080, { PORT: '9090' })).toBe(9090);
    expect(readInt('PORT', 8080, { PORT: '007' })).toBe(7);
  });

  it.each(['abc', '-1', '1.5', '1e3', ' 12', '12 ', '0x10', '12abc', '+3'])('rejects %j naming the variable and the value', (raw) => {
    const err = configError(() => readInt('PORT', 8080, { PORT: raw }));
    expect(err.message).toContain('PORT');
    expect(err.message).toContain(`"${raw}"`);
  });

  it('refuses a value below its minimum, naming the variable (a concurrency of 0 would stall)', () => {
    expect(readInt('WEBHOOK_MAX_IN_FLIGHT', 256, { WEBHOOK_MAX_IN_FLIGHT: '1' }, 1)).toBe(1);
    expect(configError(() => readInt('WEBHOOK_MAX_IN_FLIGHT', 256, { WEBHOOK_MAX_IN_FLIGHT: '0' }, 1)).message).toBe(
      'WEBHOOK_MAX_IN_FLIGHT must be at least 1, got 0',
    );
  });

  it('reads process.env by default', () => {
    const name = `SB_CONFIG_TEST_${process.pid}`;
    process.env[name] = '42';
    try {
      expect(readInt(name, 1)).toBe(42);
    } finally {
      delete process.env[name];
    }
  });
});

describe('readBool', () => {
  it.each([
    ['true', true],
    ['1', true],
    ['false', false],
    ['0', false],
  ])('reads %j as %s', (raw, expected) => {
    expect(readBool('WEBHOOKS_ALLOW_PRIVATE_TARGETS', !expected, { WEBHOOKS_ALLOW_PRIVATE_TARGETS: raw })).toBe(expected);
  });

  it('falls back when unset or empty', () => {
    expect(readBool('FLAG', true, {})).toBe(true);
    expect(readBool('FLAG', false, {})).toBe(false);
    expect(readBool('FLAG', true, { FLAG: '' })).toBe(true);
  });

  it.each(['yes', 'no', 'on', '2', 'truthy', ' true'])('rejects %j naming the variable', (raw) => {
    const err = configError(() => readBool('WEBHOOKS_ALLOW_PRIVATE_TARGETS', false, { WEBHOOKS_ALLOW_PRIVATE_TARGETS: raw }));
    expect(err.message).toContain('WEBHOOKS_ALLOW_PRIVATE_TARGETS');
    expect(err.message).toContain(`"${raw}"`);
  });
});

describe('parseDuration / readDuration', () => {
  it.each([
    ['250ms', 250],
    ['0ms', 0],
    ['5s', 5_000],
    ['30m', 1_800_000],
    ['2h', 7_200_000],
    ['30d', 2_592_000_000],
    [' 10s ', 10_000],
  ])('parses %j as %d ms', (raw, ms) => {
    expect(parseDuration(raw)).toBe(ms);
  });

  it.each(['', '5', 's', '5 s', '-5s', '1.5s', '5sec', '5S', '5w', 'ms', '5s5'])('rejects %j with a message quoting it', (raw) => {
    const err = configError(() => parseDuration(raw));
    expect(err.message).toContain(`"${raw}"`);
  });

  it('readDuration names the variable when its value is not a duration', () => {
    expect(readDuration('WEBHOOK_TIMEOUT', '5s', {})).toBe(5_000);
    expect(readDuration('WEBHOOK_TIMEOUT', '5s', { WEBHOOK_TIMEOUT: '' })).toBe(5_000);
    expect(readDuration('WEBHOOK_TIMEOUT', '5s', { WEBHOOK_TIMEOUT: '250ms' })).toBe(250);
    const err = configError(() => readDuration('WEBHOOK_TIMEOUT', '5s', { WEBHOOK_TIMEOUT: 'soon' }));
    expect(err.message).toContain('WEBHOOK_TIMEOUT');
    expect(err.message).toContain('"soon"');
  });

  it('readDuration refuses a duration below its minimum (a period of 0 would be a loop)', () => {
    expect(readDuration('HOUSEKEEPING_INTERVAL', '1h', { HOUSEKEEPING_INTERVAL: '1ms' }, 1)).toBe(1);
    expect(configError(() => readDuration('HOUSEKEEPING_INTERVAL', '1h', { HOUSEKEEPING_INTERVAL: '0s' }, 1)).message).toBe(
      'HOUSEKEEPING_INTERVAL must be at least 1 ms, got "0s"',
    );
  });
});

describe('readCommonConfig', () => {
  const secret32 = 'x'.repeat(32);
  const base = { SWITCHBOARD_MESH_SECRET: secret32, DATABASE_URL: 'postgres://u@127.0.0.1/db', SWITCHBOARD_DATA_KEYS: DataKeyRing.generateEntry('k1') };

  it('reads the shared settings with their defaults', () => {
    expect(readCommonConfig(base)).toEqual({
      databaseUrl: 'postgres://u@127.0.0.1/db',
      natsUrl: 'nats://127.0.0.1:4222',
      meshSecret: secret32,
      dataKeys: expect.any(DataKeyRing),
      logLevel: 'info',
      eventsSubjectPrefix: 'switchboard.events',
      eventsStream: 'SWITCHBOARD_EVENTS',
      workSubjectPrefix: 'switchboard',
      workStream: 'SWITCHBOARD_WORK',
      batchLingerMs: 50,
    });
    expect(
      readCommonConfig({
        ...base,
        NATS_URL: 'nats://nats:4222',
        LOG_LEVEL: 'warn',
        EVENTS_SUBJECT_PREFIX: 'p',
        EVENTS_STREAM: 'S',
        WORK_SUBJECT_PREFIX: 'w',
        WORK_STREAM: 'W',
      }),
    ).toMatchObject({
      natsUrl: 'nats://nats:4222',
      logLevel: 'warn',
      eventsSubjectPrefix: 'p',
      eventsStream: 'S',
      workSubjectPrefix: 'w',
      workStream: 'W',
    });
  });

  it('derives every stream and subject prefix from SWITCHBOARD_NAMESPACE, each still overridable alone', () => {
    expect(readEventsConfig({ SWITCHBOARD_NAMESPACE: 'staging' })).toMatchObject({
      eventsSubjectPrefix: 'staging.events',
      eventsStream: 'STAGING_EVENTS',
      workSubjectPrefix: 'staging',
      workStream: 'STAGING_WORK',
    });
    // Distinct namespaces keep distinct streams.
    expect(readEventsConfig({ SWITCHBOARD_NAMESPACE: 'a-b' }).eventsStream).toBe('A-B_EVENTS');
    expect(readEventsConfig({ SWITCHBOARD_NAMESPACE: 'a_b' }).eventsStream).toBe('A_B_EVENTS');
    expect(readEventsConfig({ SWITCHBOARD_NAMESPACE: 'staging', EVENTS_STREAM: 'S' })).toMatchObject({ eventsStream: 'S', workStream: 'STAGING_WORK' });
  });

  it('refuses a namespace that is not one subject token, naming the variable', () => {
    for (const namespace of ['a.b', 'Upper', '-lead', 'a b', 'a>', 'x'.repeat(65)]) {
      expect(configError(() => readEventsConfig({ SWITCHBOARD_NAMESPACE: namespace })).message).toContain('SWITCHBOARD_NAMESPACE');
    }
  });

  it('takes an NKey user seed as NATS_NKEY_SEED and refuses anything else, naming the variable (docs/operations.md#nats-credentials)', () => {
    const user = nkeys.createUser();
    const seed = new TextDecoder().decode(user.getSeed());
    expect(readEventsConfig({ NATS_NKEY_SEED: seed }).natsSeed).toBe(seed);
    expect(readEventsConfig({}).natsSeed).toBeUndefined();
    const account = new TextDecoder().decode(nkeys.createAccount().getSeed());
    for (const wrong of [user.getPublicKey(), account, seed.slice(0, -4), 'not-a-seed']) {
      const message = configError(() => readEventsConfig({ NATS_NKEY_SEED: wrong })).message;
      expect(message).toContain('NATS_NKEY_SEED');
      expect(message).not.toContain(wrong);
    }
  });

  it('turns a database name into a namespace', () => {
    expect(namespaceOf('switchboard_0123abcdef')).toBe('switchboard_0123abcdef');
    expect(namespaceOf('Sb.Test-1')).toBe('sb_test-1');
    expect(namespaceOf('__')).toBe('switchboard');
  });

  it('refuses a mesh secret shorter than 32 bytes, naming the variable', () => {
    for (const secret of ['x'.repeat(31), 'short', '€'.repeat(10) /* 30 bytes */]) {
      const err = configError(() => readCommonConfig({ ...base, SWITCHBOARD_MESH_SECRET: secret }));
      expect(err.message).toContain('SWITCHBOARD_MESH_SECRET');
      // The message never echoes the secret.
      expect(err.message).not.toContain(secret);
    }
  });

  it('measures the secret in UTF-8 bytes, not characters', () => {
    // 11 characters, 33 bytes: long enough.
    expect(readCommonConfig({ ...base, SWITCHBOARD_MESH_SECRET: '€'.repeat(11) }).meshSecret).toBe('€'.repeat(11));
  });

  it('names a missing database URL', () => {
    expect(configError(() => readCommonConfig({ SWITCHBOARD_MESH_SECRET: secret32 })).message).toContain('DATABASE_URL');
  });
});

describe('readMeshKeyring (docs/api/internal-calls.md#mesh-keys)', () => {
  const gatewayKey = 'g'.repeat(32);
  const dataPlaneKey = 'd'.repeat(40);

  it('needs a key to sign with: its own entry or the shared secret, naming both variables', () => {
    const err = configError(() => readMeshKeyring('keys', { SWITCHBOARD_MESH_KEYS: `gateway:${gatewayKey}` }));
    expect(err.message).toContain('SWITCHBOARD_MESH_SECRET');
    expect(err.message).toContain('SWITCHBOARD_MESH_KEYS');
    expect(err.message).not.toContain(gatewayKey);
    expect(readMeshKeyring('gateway', { SWITCHBOARD_MESH_KEYS: `gateway:${gatewayKey}` }).signs('gateway')).toBe(true);
    expect(readMeshKeyring('keys', { SWITCHBOARD_MESH_SECRET: gatewayKey }).signs('keys')).toBe(true);
    expect(configError(() => readMeshKeyring('keys', {})).message).toContain('SWITCHBOARD_MESH_SECRET');
  });

  it('keeps each component to its own keys, the current first, and the shared secret for the others', () => {
    const shared = 's'.repeat(32);
    const keyring = readMeshKeyring('keys', {
      SWITCHBOARD_MESH_KEYS: ` gateway:${gatewayKey}, data-plane:${dataPlaneKey},data-plane:${'o'.repeat(32)} `,
      SWITCHBOARD_MESH_SECRET: shared,
    });
    const text = (keys: readonly Uint8Array[]) => keys.map((key) => new TextDecoder().decode(key));
    expect(text(keyring.keysOf('gateway'))).toEqual([gatewayKey]);
    expect(text(keyring.keysOf('data-plane'))).toEqual([dataPlaneKey, 'o'.repeat(32)]);
    expect(text(keyring.keysOf('keys'))).toEqual([shared]);
  });

  it('refuses an unknown component, a missing colon or a short key, never echoing a key', () => {
    const short = 'short-key';
    for (const [value, expected] of [
      [`gatway:${gatewayKey}`, '"gatway"'],
      [gatewayKey, 'entry 1 must be component:secret'],
      [`gateway:${gatewayKey},keys:${short}`, 'the key of keys (entry 2) must be at least 32 bytes'],
    ]) {
      const err = configError(() => readMeshKeyring('gateway', { SWITCHBOARD_MESH_KEYS: value, SWITCHBOARD_MESH_SECRET: 'x'.repeat(32) }));
      expect(err.message).toContain(expected);
      expect(err.message).not.toContain(gatewayKey);
      expect(err.message).not.toContain(short);
    }
  });
});

describe('serviceUrl', () => {
  it('uses <NAME>_URL, else localhost on the default port the contracts list (docs/api/internal-calls.md)', () => {
    expect(Object.entries(servicePorts).map(([name, port]) => serviceUrl(name, port, {}))).toEqual([
      'http://127.0.0.1:50051',
      'http://127.0.0.1:50052',
      'http://127.0.0.1:50053',
      'http://127.0.0.1:50054',
      'http://127.0.0.1:50055',
    ]);
    expect(serviceUrl('keys', servicePorts.keys, { KEYS_URL: 'http://keys:9000' })).toBe('http://keys:9000');
  });
});
