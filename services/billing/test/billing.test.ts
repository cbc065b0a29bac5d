import { create, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { jetstream } from '@nats-io/jetstream';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { BillingService, CheckoutService, UsageRecordSchema, UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { newId } from '@switchboard/runtime/ids';
import { createLogger } from '@switchboard/runtime/log';
import { connectNats, ensureWorkStream, workSubjects } from '@switchboard/runtime/nats';
import { contentSecurityPolicyHeader } from '@switchboard/runtime/server';
import { eventually, memberClaims, outcomeOf, requireEnv, ServiceUnderTest } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const service = new ServiceUnderTest(new URL('../dist/src/main.js', import.meta.url), 'billing');

const amount = (value: string) => ({ kind: { case: 'stringValue' as const, value } });

/** The billing service on its own: it boots, migrates, guards every RPC by its proto rule, and answers past it. */
describe('billing service', () => {
  // The sandbox provider takes the top-ups, and accounts open with 1.00 (docs/api/billing.md#free-credit-and-the-sandbox).
  beforeAll(() => service.start({ env: { BILLING_SANDBOX: 'true', SANDBOX_OPENING_CREDIT_USD: '1.00' } }));
  afterAll(() => service.stop());

  it('refuses calls without a mesh token or principal, applies the access rules, and answers past them', async () => {
    expect(await outcomeOf(service.client(BillingService, null).getBalance({}))).toBe('Unauthenticated');
    // Top-ups are for owners and admins (docs/conventions.md#roles), decided before the handler.
    expect(await outcomeOf(service.client(BillingService, memberClaims('developer')).createTopup({}))).toBe('PermissionDenied');
    expect(await outcomeOf(service.client(BillingService, memberClaims('admin')).createTopup({}))).toBe('InvalidArgument');
    expect(
      await outcomeOf(
        service.client(BillingService, memberClaims('admin')).createTopup({ amountUsd: amount('5.00'), idempotencyKey: `service-test-${Date.now()}` }),
      ),
    ).toBe('ok');
    expect(await outcomeOf(service.client(BillingService, memberClaims('developer')).getBalance({}))).toBe('ok');
    // The sandbox checkout page is public: its token is the capability, so an unknown one is NotFound.
    expect(await outcomeOf(service.client(CheckoutService, { caller: 'gateway' }).getSandboxCheckout({}))).toBe('NotFound');
    expect(await outcomeOf(service.client(CheckoutService, { caller: 'gateway' }).getSandboxCheckout({ token: 'not-a-token' }))).toBe('NotFound');
    expect(await outcomeOf(service.client(UsageService, memberClaims('owner')).recordUsage({}))).toBe('PermissionDenied');
    const refused = await service
      .client(UsageService, { caller: 'data-plane' })
      .recordUsage({})
      .then(
        () => undefined,
        (err: unknown) => ConnectError.from(err),
      );
    expect(refused?.code).toBe(Code.InvalidArgument);
    expect(refused?.findDetails(ErrorDetailSchema)[0]?.field).toBe('generation_id');
  });

  it('gives the data plane, and only it, the price list of the pricing file', async () => {
    for (const claims of [{ caller: 'gateway' }, { caller: 'conversations' }, memberClaims('owner')]) {
      expect(await outcomeOf(service.client(UsageService, claims).getPriceList({})), JSON.stringify(claims)).toBe('PermissionDenied');
    }
    expect(await outcomeOf(service.client(UsageService, null).getPriceList({}))).toBe('Unauthenticated');
    const list = await service.client(UsageService, { caller: 'data-plane' }).getPriceList({});
    expect(list.version).toBe('2026-11-01');
    expect(list.tiers.map(({ tier, inputUsdPer1m, outputUsdPer1m }) => ({ tier, inputUsdPer1m, outputUsdPer1m }))).toEqual([
      { tier: 'fast', inputUsdPer1m: '0.10', outputUsdPer1m: '0.40' },
      { tier: 'balanced', inputUsdPer1m: '0.50', outputUsdPer1m: '2.00' },
    ]);
    // payg's 5 beats pro's 3.
    expect(list.maxPassthroughMarkupPct).toBe('5');
  });

  it('settles the usage records data planes put on the work stream, each generation once', async () => {
    const prefix = requireEnv('WORK_SUBJECT_PREFIX');
    const nc = await connectNats(requireEnv('NATS_URL'), 'billing-test', createLogger('billing-test', 'silent'));
    try {
      await ensureWorkStream(nc, requireEnv('WORK_STREAM'), prefix);
      const owner = { ...memberClaims('owner'), workspaceId: newId('org') };
      const publish = (generationId: string, costUsd: string, msgID = generationId) =>
        jetstream(nc).publish(
          workSubjects(prefix).usage,
          toBinary(
            UsageRecordSchema,
            create(UsageRecordSchema, {
              generationId,
              keyId: 'key_work',
              workspaceId: owner.workspaceId,
              model: 'service/fast',
              inputTokens: 1000n,
              outputTokens: 500n,
              costUsd,
              tier: 'fast',
              planId: 'payg',
              pricingVersion: '2026-11-01',
            }),
          ),
          { msgID },
        );
      // Settled in stream order: the balance reaches 0.625 only if the repeat, past JetStream's
      // deduplication (another message id), was not billed again.
      const repeated = newId('gen');
      await publish(repeated, '0.25');
      await publish(repeated, '0.5', newId('msg'));
      await publish(newId('gen'), '0.125');
      await eventually(async () => (await service.client(BillingService, owner).getBalance({})).balanceUsd === '0.625', 'the usage to be debited');
    } finally {
      await nc.close();
    }
  });

  it('renders the sandbox checkout page with its own CSP for the gateway', async () => {
    const checkout = await service
      .client(BillingService, memberClaims('owner'))
      .createTopup({ amountUsd: amount('3.5'), idempotencyKey: `service-page-${Date.now()}` });
    const token = new URL(checkout.checkoutUrl).pathname.split('/').pop()!;
    let policy: string | null = null;
    const page = await service.client(CheckoutService, { caller: 'gateway' }).getSandboxCheckout(
      { token },
      {
        onHeader: (header) => {
          policy = header.get(contentSecurityPolicyHeader);
        },
      },
    );
    expect(page.contentType).toBe('text/html; charset=utf-8');
    const html = new TextDecoder().decode(page.data);
    expect(html).toContain('Pay 3.50 USD');
    expect(html).toContain(checkout.checkoutId);
    const nonce = /<script nonce="([^"]+)">/.exec(html)?.[1];
    expect(nonce).toBeTruthy();
    expect(policy).toContain(`script-src 'nonce-${nonce}'`);
    expect(policy).toMatch(/^default-src 'none'; /);
  });
});
