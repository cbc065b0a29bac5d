import type { ConnectRouter } from '@connectrpc/connect';
import { BillingService, CheckoutService, UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';

/**
 * The billing RPCs. Their behaviour is a later issue: until it lands every method answers
 * `unimplemented` (501 on the REST surface) rather than a fake success.
 */
export function routes(router: ConnectRouter): void {
  router.service(BillingService, {});
  router.service(CheckoutService, {});
  router.service(UsageService, {});
}
