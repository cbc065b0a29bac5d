import { Code } from '@connectrpc/connect';
import { readBillingConfig } from '@switchboard/billing/config';
import { prepareBilling } from '@switchboard/billing/prepare';
import { registerRoutes } from '@switchboard/billing/server';
import { BillingService, CheckoutService, UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService, refusalOf } from '@switchboard/runtime/in-process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The billing handlers in this process (createRouterTransport), built as main.ts builds them on a
 * schema of their own (the sandbox provider): how each RPC maps the caller, the input and the
 * domain's answers.
 */

let service: InProcessService;
let clientAs: ReturnType<InProcessService['serve']>;

const workspaceId = newId('org');
const member = (role: string) => ({ caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role });
const amount = (value: string) => ({ kind: { case: 'stringValue' as const, value } });

beforeAll(async () => {
  service = await inProcessService('billing', new URL('../dist/migrations/', import.meta.url));
  const handlers = prepareBilling(service.runtime, readBillingConfig({ BILLING_SANDBOX: 'true', SANDBOX_OPENING_CREDIT_USD: '1.00' }));
  clientAs = service.serve((router) => registerRoutes(router, handlers));
});

afterAll(() => service?.stop());

describe('the billing handlers', () => {
  it('show the opening credit, and credit a sandbox top-up completed through its page token', async () => {
    const billing = clientAs(BillingService, member('owner'));
    expect((await billing.getBalance({})).balanceUsd).toBe('1.00');
    const checkout = await billing.createTopup({ amountUsd: amount('5'), idempotencyKey: 'topup-1' });
    expect(checkout).toMatchObject({ amountUsd: '5', status: 'pending' });
    // The sandbox's checkout URL is the gateway's page GET /v1/billing/sandbox/checkout/{token}.
    const token = new URL(checkout.checkoutUrl).pathname.split('/').pop()!;
    const completed = await clientAs(CheckoutService, { caller: 'gateway' }).completeSandboxCheckout({ token });
    expect(completed.status).toBe('completed');
    expect((await billing.getBalance({})).balanceUsd).toBe('6.00');
  });

  it('name the field of invalid input', async () => {
    const billing = clientAs(BillingService, member('admin'));
    expect(await refusalOf(billing.createTopup({ amountUsd: amount('0'), idempotencyKey: 'k' }))).toEqual({
      code: Code.InvalidArgument,
      error: 'invalid_request',
      field: 'amount_usd',
    });
    expect(await refusalOf(billing.createTopup({ amountUsd: amount('5'), idempotencyKey: '' }))).toMatchObject({ field: 'idempotency_key' });
  });

  it('answer 403 for a developer topping up, 404 for an unknown checkout token, and keep internal RPCs to their callers', async () => {
    expect(await refusalOf(clientAs(BillingService, member('developer')).createTopup({ amountUsd: amount('5'), idempotencyKey: 'k' }))).toMatchObject({
      code: Code.PermissionDenied,
      error: 'forbidden',
    });
    expect(await refusalOf(clientAs(CheckoutService, { caller: 'gateway' }).completeSandboxCheckout({ token: 'nope' }))).toMatchObject({
      code: Code.NotFound,
      error: 'checkout_not_found',
    });
    expect(await refusalOf(clientAs(UsageService, { caller: 'gateway' }).getPriceList({}))).toMatchObject({ code: Code.PermissionDenied });
  });
});
