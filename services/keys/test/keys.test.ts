import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { dropDatabase, ensureDatabase } from '@switchboard/runtime/infra';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { DataKeyRing } from '@switchboard/runtime/secrets';
import { memberClaims, outcomeOf, type RunningService, requireEnv, ServiceUnderTest } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const main = new URL('../dist/src/main.js', import.meta.url);
const service = new ServiceUnderTest(main, 'keys');

/** The keys service on its own: it boots, migrates, and guards every RPC by its proto rule. */
describe('keys service', () => {
  // A database of its own: the data-key rotation below re-encrypts every row it finds.
  const url = new URL(requireEnv('DATABASE_URL'));
  url.pathname = `/${url.pathname.slice(1)}_keys_${randomBytes(3).toString('hex')}`;
  const databaseUrl = url.toString();
  let running: RunningService;

  beforeAll(async () => {
    await ensureDatabase(databaseUrl);
    running = await service.start({ env: { DATABASE_URL: databaseUrl } });
  });
  afterAll(async () => {
    await service.stop();
    await dropDatabase(databaseUrl).catch(() => undefined);
  });

  it('refuses calls without a mesh token or principal, and lets internal RPCs be called only by the components their rule names', async () => {
    expect(await outcomeOf(service.client(KeyService, null).listKeys({}))).toBe('Unauthenticated');
    expect(await outcomeOf(service.client(KeyService, { caller: 'gateway' }).listKeys({}))).toBe('Unauthenticated');
    expect(await outcomeOf(service.client(KeyService, memberClaims('developer')).createKey({ name: 'ci' }))).toBe('ok');
    expect(await outcomeOf(service.client(KeyService, memberClaims('owner')).authorizeKey({ fullKey: 'sb_x' }))).toBe('PermissionDenied');
    expect(await service.client(KeyService, { caller: 'data-plane' }).authorizeKey({ fullKey: 'sb_x' })).toMatchObject({ allowed: false, reason: 'unknown' });
    expect(await outcomeOf(service.client(KeyService, { caller: 'data-plane' }).authenticateKey({ fullKey: 'sb_x' }))).toBe('PermissionDenied');
    expect(await outcomeOf(service.client(KeyService, { caller: 'gateway' }).authenticateKey({ fullKey: 'sb_x' }))).toBe('ok');
    expect(await outcomeOf(service.client(KeyService, { caller: 'gateway' }).resolveAlertWebhook({ keyId: 'key_x' }))).toBe('PermissionDenied');
    expect((await service.client(KeyService, { caller: 'webhooks' }).resolveAlertWebhook({ keyId: 'key_x' })).url).toBeUndefined();
  });

  it('answers AuthorizeKey over Connect JSON with the reason strings of docs/api/internal-calls.md, not the KeyRefusal names', async () => {
    const owner = service.client(KeyService, memberClaims('owner'));
    const allowed = await owner.createKey({ name: 'json' });
    const capped = await owner.createKey({ name: 'capped', monthlySpendCapUsd: '0' });
    const revoked = await owner.createKey({ name: 'revoked' });
    await owner.revokeKey({ keyId: revoked.key!.keyId });
    const token = await new MeshTokens(requireEnv('SWITCHBOARD_MESH_SECRET')).mint('keys', { caller: 'data-plane' });
    const reasonOf = async (fullKey: string) => {
      const response = await fetch(`${running.baseUrl}/switchboard.keys.v1.KeyService/AuthorizeKey`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ full_key: fullKey }),
      });
      expect(response.status).toBe(200);
      return ((await response.json()) as { reason?: string }).reason;
    };
    // proto3 JSON leaves an empty string out: an allowed key has no `reason`, as before the enum.
    expect(await reasonOf(allowed.fullKey)).toBeUndefined();
    expect(await reasonOf('sb_x')).toBe('unknown');
    expect(await reasonOf(revoked.fullKey)).toBe('revoked');
    expect(await reasonOf(capped.fullKey)).toBe('spend_cap_exceeded');
  });

  it('gives the alert webhook and its signing secret to the webhooks service only, also after a data key rotation', async () => {
    const owner = service.client(KeyService, memberClaims('owner'));
    const { key } = await owner.createKey({ name: 'alerts' });
    const set = await owner.setAlertWebhook({ keyId: key!.keyId, url: 'https://alerts.example.com/h', thresholdPct: 90 });
    const resolve = () => service.client(KeyService, { caller: 'webhooks' }).resolveAlertWebhook({ keyId: key!.keyId });
    expect(await resolve()).toMatchObject({ url: 'https://alerts.example.com/h', signingSecret: set.signingSecret, thresholdPct: 90 });

    // A new data key in front, every secret re-encrypted under it, then the old key dropped.
    await service.stop();
    const k1 = requireEnv('SWITCHBOARD_DATA_KEYS');
    const k2 = DataKeyRing.generateEntry('k2');
    const rotation = spawn(process.execPath, [fileURLToPath(main), '--rotate-data-key'], {
      env: { ...process.env, DATABASE_URL: databaseUrl, SWITCHBOARD_DATA_KEYS: `${k2},${k1}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    for (const stream of [rotation.stdout, rotation.stderr]) stream.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    expect(await new Promise((resolve) => rotation.once('exit', resolve)), output).toBe(0);
    expect(output).toContain('data key rotation finished');
    expect(output).not.toContain(set.signingSecret);
    await service.start({ env: { DATABASE_URL: databaseUrl, SWITCHBOARD_DATA_KEYS: k2 } });
    expect((await resolve()).signingSecret).toBe(set.signingSecret);
  });
});
