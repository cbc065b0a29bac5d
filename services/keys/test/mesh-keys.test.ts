import { randomBytes } from 'node:crypto';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { type MeshClaims, MeshTokens } from '@switchboard/runtime/mesh-token';
import { eventually, memberClaims, meshClient, outcomeOf, type RunningService, requireEnv, ServiceUnderTest } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const service = new ServiceUnderTest(new URL('../dist/src/main.js', import.meta.url), 'keys');
const newKey = () => randomBytes(32).toString('base64url');
const key = { keys: newKey(), gateway: newKey(), dataPlane: newKey(), dataPlaneNext: newKey(), billing: newKey(), webhooks: newKey(), identity: newKey() };

/**
 * The keys service with a keyring of its own and no shared secret (docs/api/internal-calls.md#mesh-keys):
 * each caller's token is verified with that caller's key, only the gateway speaks for principals,
 * and the data plane's key is being rotated (both of its keys accepted).
 */
describe('keys service with per-component mesh keys', () => {
  let running: RunningService;
  /** A client signing with `secret` as the component `claims.caller` names. */
  const signedWith = (secret: string, claims: MeshClaims) => meshClient(KeyService, running.baseUrl, 'keys', claims, { meshSecret: secret });
  const auditLine = (fragment: string) =>
    eventually(
      () =>
        running
          .output()
          .split('\n')
          .find((line) => line.includes('"audit":true') && line.includes(fragment)),
      `an audit line with ${fragment}`,
    );

  beforeAll(async () => {
    running = await service.start({
      env: {
        // No shared secret: the keyring alone.
        SWITCHBOARD_MESH_SECRET: '',
        SWITCHBOARD_MESH_KEYS: [
          `keys:${key.keys}`,
          `gateway:${key.gateway}`,
          `data-plane:${key.dataPlaneNext}`,
          `data-plane:${key.dataPlane}`,
          `billing:${key.billing}`,
          `webhooks:${key.webhooks}`,
          `identity:${key.identity}`,
        ].join(','),
      },
    });
  });
  afterAll(() => service.stop());

  it('serves each caller signing with its own key: the gateway for a principal, the data plane with its current and previous keys', async () => {
    const created = await signedWith(key.gateway, memberClaims('owner')).createKey({ name: 'mesh-keys' });
    for (const dataPlaneKey of [key.dataPlane, key.dataPlaneNext]) {
      expect(await signedWith(dataPlaneKey, { caller: 'data-plane' }).authorizeKey({ fullKey: created.fullKey })).toMatchObject({ allowed: true });
    }
    expect((await signedWith(key.webhooks, { caller: 'webhooks' }).resolveAlertWebhook({ keyId: created.key!.keyId })).url).toBeUndefined();
  });

  it("refuses a token signed with the data plane's key that claims the gateway, with an audit line", async () => {
    const forged = signedWith(key.dataPlane, memberClaims('owner'));
    expect(await outcomeOf(forged.createKey({ name: 'forged' }))).toBe('Unauthenticated');
    const line = JSON.parse((await auditLine('"claimed_caller":"gateway"')) as string) as Record<string, unknown>;
    expect(line).toMatchObject({ event: 'mesh_token', outcome: 'denied', audience: 'keys' });
    // The shared secret of the test run is nobody's key here.
    expect(await outcomeOf(signedWith(requireEnv('SWITCHBOARD_MESH_SECRET'), { caller: 'data-plane' }).authorizeKey({ fullKey: 'sb_x' }))).toBe(
      'Unauthenticated',
    );
  });

  it('refuses a data-plane token carrying a principal, and a data plane calling a management RPC, each with an audit line', async () => {
    const withPrincipal = signedWith(key.dataPlane, { ...memberClaims('owner'), caller: 'data-plane' });
    expect(await outcomeOf(withPrincipal.listKeys({}))).toBe('Unauthenticated');
    await auditLine('only the gateway acts for principals');
    const management = signedWith(key.dataPlane, { caller: 'data-plane' });
    expect(await outcomeOf(management.createKey({ name: 'from-the-data-plane' }))).toBe('PermissionDenied');
    expect(await outcomeOf(management.listKeys({}))).toBe('PermissionDenied');
    const line = JSON.parse((await auditLine('"reason":"caller_not_allowed"')) as string) as Record<string, unknown>;
    expect(line).toMatchObject({ event: 'authorization', outcome: 'denied', caller: 'data-plane' });
  });

  it('keeps serving while the data plane rolls from its previous key to the next: no call fails', async () => {
    const created = await signedWith(key.gateway, memberClaims('owner')).createKey({ name: 'rotation' });
    const before = new MeshTokens(key.dataPlane);
    const after = new MeshTokens(key.dataPlaneNext);
    // Replicas on either key, interleaved, as during a rolling restart.
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, async (_, index) => {
        const token = await (index % 2 === 0 ? before : after).mint('keys', { caller: 'data-plane' });
        const response = await fetch(`${running.baseUrl}/switchboard.keys.v1.KeyService/AuthorizeKey`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({ full_key: created.fullKey }),
        });
        return response.status;
      }),
    );
    expect(new Set(outcomes)).toEqual(new Set([200]));
  });
});
