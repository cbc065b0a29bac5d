import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { AccountService, AuthService } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { createDb } from '@switchboard/runtime/db';
import { ensureDatabase } from '@switchboard/runtime/infra';
import { DataKeyRing } from '@switchboard/runtime/secrets';
import { meshClient, outcomeOf } from '@switchboard/runtime/testing';
import { createLocalJWKSet, jwtVerify } from 'jose';
import * as OTPAuth from 'otpauth';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropCheckedDatabase, identityMain, type RunningIdentity, requireEnv, startIdentity, uniqueEmail } from './helpers.js';

/**
 * docs/api/internal-calls.md#mesh-tokens and the data-key ring: the mesh secret only authenticates calls, so changing it (with
 * the data keys kept) leaves every account, session, 2FA secret and signing key working; the
 * data keys rotate by putting a new key in front, re-encrypting, and dropping the old one.
 * Runs in a database of its own: it re-encrypts the signing key under keys no other file has.
 */
describe('secret rotation', () => {
  const url = new URL(requireEnv('DATABASE_URL'));
  url.pathname = `/${url.pathname.slice(1)}_rotation_${randomBytes(3).toString('hex')}`;
  const databaseUrl = url.toString();
  const secretA = randomBytes(32).toString('base64url');
  const secretB = randomBytes(32).toString('base64url');
  const k1 = DataKeyRing.generateEntry('k1');
  const k2 = DataKeyRing.generateEntry('k2');
  const password = 'correct horse battery staple';
  const email = uniqueEmail('rotation');
  let service: RunningIdentity | undefined;
  let totp: OTPAuth.TOTP;
  /** Codes of three distinct time steps around now (each step is accepted once). */
  let steps: number[];
  let kid: string;

  const start = async (env: Record<string, string>) => {
    await service?.stop();
    service = await startIdentity({ env: { DATABASE_URL: databaseUrl, ...env } });
    return service;
  };
  const client = <T extends typeof AuthService | typeof AccountService>(desc: T, meshSecret: string, userId?: string) =>
    meshClient(desc, service!.baseUrl, 'identity', userId ? { caller: 'gateway', principalId: userId, principalType: 'user' } : { caller: 'gateway' }, {
      meshSecret,
    });
  const code = () => totp.generate({ timestamp: steps.shift()! * 30_000 });

  /** Signs in with password and TOTP, refreshes, and checks the access token against the JWKS. */
  async function signInWithTwoFactor(meshSecret: string) {
    const auth = client(AuthService, meshSecret);
    const challenge = await auth.login({ email, password });
    expect(challenge.mfaRequired).toBe(true);
    const { session } = await auth.loginSecondFactor({ mfaToken: challenge.mfaToken, code: code() });
    const refreshed = await auth.refresh({ refreshToken: session!.refreshToken });
    const jwks = createLocalJWKSet({ keys: (await auth.getJwks({})).keys.map((key) => ({ ...key })) });
    const { protectedHeader } = await jwtVerify(refreshed.session!.accessToken, jwks);
    return protectedHeader.kid;
  }

  async function encryptedColumns() {
    const db = createDb(databaseUrl, 'identity', 1);
    try {
      const keys = await db('signing_keys').pluck('private_jwk_encrypted');
      const seeds = await db('two_factor').whereNotNull('secret_encrypted').pluck('secret_encrypted');
      return [...keys, ...seeds] as string[];
    } finally {
      await db.destroy();
    }
  }

  beforeAll(async () => {
    await ensureDatabase(databaseUrl);
    // Three steps (previous, current, next): the first must be used before the step ends, so
    // near the end of one this waits for the clock to pass into the next (a wait on time, not
    // on the service); the others stay valid for the 30 s after.
    const untilNextStep = 30_000 - (Date.now() % 30_000);
    if (untilNextStep < 8_000) await new Promise((resolve) => setTimeout(resolve, untilNextStep + 50));
    const now = Math.floor(Date.now() / 30_000);
    steps = [now - 1, now, now + 1];
  });

  afterAll(async () => {
    await service?.stop();
    await dropCheckedDatabase(databaseUrl);
  });

  it('keeps accounts, sessions, 2FA and the signing key working when the mesh secret changes', async () => {
    await start({ SWITCHBOARD_MESH_SECRET: secretA, SWITCHBOARD_DATA_KEYS: k1 });
    const { user } = await client(AuthService, secretA).register({ email, password });
    const account = client(AccountService, secretA, user!.userId);
    const enrolled = await account.enrollTwoFactor({ password });
    totp = new OTPAuth.TOTP({ algorithm: 'SHA1', digits: 6, period: 30, secret: OTPAuth.Secret.fromBase32(enrolled.secret) });
    expect((await account.activateTwoFactor({ code: code() })).recoveryCodes).toHaveLength(10);
    kid = (await client(AuthService, secretA).getJwks({})).keys[0].kid;

    // A new mesh secret, the old one still accepted while the rest of the mesh catches up.
    await start({ SWITCHBOARD_MESH_SECRET: secretB, SWITCHBOARD_MESH_SECRET_PREVIOUS: secretA, SWITCHBOARD_DATA_KEYS: k1 });
    expect(await signInWithTwoFactor(secretB)).toBe(kid);
    expect(await outcomeOf(client(AuthService, secretA).getJwks({}))).toBe('ok');
    // Once the previous secret is dropped, tokens signed with it are refused.
    await start({ SWITCHBOARD_MESH_SECRET: secretB, SWITCHBOARD_DATA_KEYS: k1 });
    expect(await outcomeOf(client(AuthService, secretA).getJwks({}))).toBe('Unauthenticated');
    expect(await outcomeOf(client(AuthService, secretB).getJwks({}))).toBe('ok');
  });

  it('re-encrypts every secret under a new data key, after which the old key can go', async () => {
    await service?.stop();
    const rotation = spawn(process.execPath, [identityMain, '--rotate-data-key'], {
      env: { ...process.env, DATABASE_URL: databaseUrl, SWITCHBOARD_MESH_SECRET: secretB, SWITCHBOARD_DATA_KEYS: `${k2},${k1}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    for (const stream of [rotation.stdout, rotation.stderr]) stream.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    expect(await new Promise((resolve) => rotation.once('exit', resolve)), output).toBe(0);
    expect(output).toContain('data key rotation finished');
    const sealed = await encryptedColumns();
    expect(sealed.length).toBeGreaterThanOrEqual(2);
    for (const value of sealed) expect(value).toMatch(/^v2\.k2\./);
    // The rotation log names tables and counts, never a key or a secret.
    expect(output).not.toContain(k1.split(':')[1]);
    expect(output).not.toContain(k2.split(':')[1]);

    await start({ SWITCHBOARD_MESH_SECRET: secretB, SWITCHBOARD_DATA_KEYS: k2 });
    expect(await signInWithTwoFactor(secretB)).toBe(kid);
  });
});
