import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { memberClaims, outcomeOf, ServiceUnderTest } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const service = new ServiceUnderTest(new URL('../dist/src/main.js', import.meta.url), 'keys');

/** The keys service on its own: it boots, migrates, and guards every RPC by its proto rule. */
describe('keys service', () => {
  beforeAll(() => service.start());
  afterAll(() => service.stop());

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

  it('gives the alert webhook and its signing secret to the webhooks service only', async () => {
    const owner = service.client(KeyService, memberClaims('owner'));
    const { key } = await owner.createKey({ name: 'alerts' });
    const set = await owner.setAlertWebhook({ keyId: key!.keyId, url: 'https://alerts.example.com/h', thresholdPct: 90 });
    const resolved = await service.client(KeyService, { caller: 'webhooks' }).resolveAlertWebhook({ keyId: key!.keyId });
    expect(resolved).toMatchObject({ url: 'https://alerts.example.com/h', signingSecret: set.signingSecret, thresholdPct: 90 });
  });
});
