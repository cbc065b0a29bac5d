import { BillingService, CheckoutService, UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { memberClaims, outcomeOf, ServiceUnderTest } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const service = new ServiceUnderTest(new URL('../dist/src/main.js', import.meta.url), 'billing');

/** The billing service as the skeleton leaves it: it boots, migrates, and guards every RPC by its proto rule. */
describe('billing service', () => {
  beforeAll(() => service.start());
  afterAll(() => service.stop());

  it('refuses calls without a mesh token or principal, and answers Unimplemented past the access rule', async () => {
    expect(await outcomeOf(service.client(BillingService, null).getBalance({}))).toBe('Unauthenticated');
    // Top-ups are for owners and admins (SPEC §3), decided before the handler.
    expect(await outcomeOf(service.client(BillingService, memberClaims('developer')).createTopup({}))).toBe('PermissionDenied');
    expect(await outcomeOf(service.client(BillingService, memberClaims('admin')).createTopup({}))).toBe('Unimplemented');
    expect(await outcomeOf(service.client(BillingService, memberClaims('developer')).getBalance({}))).toBe('Unimplemented');
    // The sandbox checkout page is public: its token is the capability.
    expect(await outcomeOf(service.client(CheckoutService, { caller: 'gateway' }).getSandboxCheckout({}))).toBe('Unimplemented');
    expect(await outcomeOf(service.client(UsageService, memberClaims('owner')).recordUsage({}))).toBe('PermissionDenied');
    expect(await outcomeOf(service.client(UsageService, { caller: 'data-plane' }).recordUsage({}))).toBe('Unimplemented');
  });
});
