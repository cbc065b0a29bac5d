import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { memberClaims, outcomeOf, ServiceUnderTest } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const service = new ServiceUnderTest(new URL('../dist/src/main.js', import.meta.url), 'keys');

/** The keys service as the skeleton leaves it: it boots, migrates, and guards every RPC by its proto rule. */
describe('keys service', () => {
  beforeAll(() => service.start());
  afterAll(() => service.stop());

  it('refuses calls without a mesh token or principal, and answers Unimplemented past the access rule', async () => {
    expect(await outcomeOf(service.client(KeyService, null).listKeys({}))).toBe('Unauthenticated');
    expect(await outcomeOf(service.client(KeyService, { caller: 'gateway' }).listKeys({}))).toBe('Unauthenticated');
    expect(await outcomeOf(service.client(KeyService, memberClaims('developer')).createKey({ name: 'ci' }))).toBe('Unimplemented');
    // Internal RPCs: only the components their rule names.
    expect(await outcomeOf(service.client(KeyService, memberClaims('owner')).authorizeKey({ fullKey: 'sb_x' }))).toBe('PermissionDenied');
    expect(await outcomeOf(service.client(KeyService, { caller: 'data-plane' }).authorizeKey({ fullKey: 'sb_x' }))).toBe('Unimplemented');
    expect(await outcomeOf(service.client(KeyService, { caller: 'data-plane' }).authenticateKey({ fullKey: 'sb_x' }))).toBe('PermissionDenied');
  });
});
