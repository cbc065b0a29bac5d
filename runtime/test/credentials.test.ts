import { execFileSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoRoot } from '@switchboard/runtime/dev/mesh';
import { describe, expect, it } from 'vitest';
import { createCredentials, credentialsEnv, keyringMembers, retire, rotate } from '../src/dev/component-credentials.js';
import { readCredentials } from '../src/dev/credentials.js';
import { natsUsersOf } from '../src/dev/nats-authorization.js';

/** The credentials generator (docs/operations.md#nats-credentials): rotation, and what it writes. */

const keyring = (raw: string) => raw.split(',').map((entry) => [entry.slice(0, entry.indexOf(':')), entry.slice(entry.indexOf(':') + 1)]);

describe('a rotation', () => {
  it('puts a component’s new key first and keeps the previous one in every keyring that verifies it, until retired', () => {
    const before = createCredentials('switchboard', false);
    const during = rotate(before, 'data-plane');
    const [fresh, previous] = during.components['data-plane'].meshKeys;
    expect(previous).toBe(before.components['data-plane'].meshKeys[0]);
    expect(fresh).not.toBe(previous);
    const verifiers = (['identity', 'keys', 'billing', 'conversations', 'webhooks'] as const).filter((service) =>
      keyringMembers(service).includes('data-plane'),
    );
    expect(verifiers.length).toBeGreaterThan(0);
    for (const verifier of verifiers) {
      const entries = keyring(credentialsEnv(during, verifier).SWITCHBOARD_MESH_KEYS).filter(([member]) => member === 'data-plane');
      expect(
        entries.map(([, key]) => key),
        verifier,
      ).toEqual([fresh, previous]);
    }
    // It signs with the new key: its own first entry.
    expect(keyring(credentialsEnv(during, 'data-plane').SWITCHBOARD_MESH_KEYS)[0]).toEqual(['data-plane', fresh]);
    // NATS knows both of its users until the rotation ends; the Secret holds the new seed.
    const users = natsUsersOf(during).filter((user) => user.name === 'data-plane');
    expect(users).toHaveLength(2);
    expect(users[0].permissions).toEqual(users[1].permissions);
    expect(credentialsEnv(during, 'data-plane').NATS_NKEY_SEED).toBe(during.components['data-plane'].natsSeeds[0]);

    const after = retire(during, 'data-plane');
    expect(after.components['data-plane']).toEqual({ natsSeeds: [during.components['data-plane'].natsSeeds[0]], meshKeys: [fresh] });
    expect(natsUsersOf(after).filter((user) => user.name === 'data-plane')).toHaveLength(1);
    // The others are untouched.
    expect(after.components.keys).toEqual(before.components.keys);
  });
});

describe('npm run credentials', () => {
  it('writes its files with mode 0600 and prints no secret; --rotate and --retire change one component', async () => {
    const out = path.join(await mkdtemp(path.join(tmpdir(), 'switchboard-credentials-')), 'out');
    const run = (...args: string[]) =>
      execFileSync(process.execPath, [path.join(repoRoot, 'runtime/dist/src/dev/credentials.js'), '--out', out, ...args], { encoding: 'utf8' });
    const printed = [run('--namespace', 'staging')];
    const first = await readCredentials(out);
    expect(first.namespace).toBe('staging');
    expect((await readdir(out)).sort()).toEqual(['credentials.json', 'nats-authorization.conf', 'nats-values.yaml', 'secrets.yaml']);
    for (const file of await readdir(out)) expect((await stat(path.join(out, file))).mode & 0o777, file).toBe(0o600);
    expect(await readFile(path.join(out, 'nats-authorization.conf'), 'utf8')).toContain('"staging.events.key.created"');
    // A second run would overwrite the credentials in use: refused.
    expect(() => execFileSync(process.execPath, [path.join(repoRoot, 'runtime/dist/src/dev/credentials.js'), '--out', out], { stdio: 'pipe' })).toThrow();

    printed.push(run('--rotate', 'keys'));
    const rotated = await readCredentials(out);
    expect(rotated.components.keys.meshKeys[1]).toBe(first.components.keys.meshKeys[0]);
    expect(rotated.components.billing).toEqual(first.components.billing);
    printed.push(run('--retire', 'keys'));
    expect((await readCredentials(out)).components.keys.meshKeys).toEqual([rotated.components.keys.meshKeys[0]]);

    const secrets = Object.values(rotated.components).flatMap((component) => [...component.natsSeeds, ...component.meshKeys]);
    for (const line of printed) for (const secret of secrets) expect(line).not.toContain(secret);
  });
});
