import type { ConnectRouter } from '@connectrpc/connect';
import { BillingService, CheckoutService, UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';

/**
 * The RPC surface of the billing service: validation and translation only; the work belongs in
 * domain modules that `main.ts` builds and passes here. Billing are built by a later issue: until
 * then the handlers are empty and every RPC answers Unimplemented (501 on the REST surface),
 * never a fake success; each call still passes its access rule first.
 */
export type BillingHandlers = Record<string, never>;

export function registerRoutes(router: ConnectRouter, _handlers: BillingHandlers): void {
  router.service(BillingService, {});
  router.service(CheckoutService, {});
  router.service(UsageService, {});
}
