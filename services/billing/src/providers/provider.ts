import { Code } from '@connectrpc/connect';
import { apiError } from '@switchboard/runtime/errors';
/** What a provider keeps of a new payment (see the columns of `checkouts`). */
export interface ProviderDetails {
  checkoutUrl?: string;
  providerSessionId?: string;
  tokenHash?: string;
  tokenKeyId?: string;
}

/** What a provider keeps of a new payment-method setup (see the columns of `payment_method_setups`). */
export interface SetupDetails {
  setupUrl?: string;
  providerSessionId?: string;
  tokenHash?: string;
  tokenKeyId?: string;
}

/** A saved payment method as a charge needs it: ours, and the provider's ids. */
export interface SavedMethodRef {
  id: string;
  providerMethodId: string;
  providerCustomerId: string | null;
}

/** How an off-session charge went; a provider that could not tell throws `retryLater` instead. */
export type ChargeOutcome = { status: 'succeeded'; providerPaymentId: string } | { status: 'failed'; reason: string; providerPaymentId?: string };

/**
 * A payment provider behind one interface (docs/api/billing.md#payment-providers): Stripe Checkout when configured, else the
 * built-in sandbox. `start` runs inside the transaction that inserted the checkout, so a retry
 * with the same idempotency key waits for it and finds the payment already started.
 */
export interface PaymentProvider {
  readonly name: 'sandbox' | 'stripe';
  /** The smallest charge the provider takes, in USD (Stripe: 0.50); none for the sandbox. */
  readonly minimumChargeUsd?: string;
  start(checkout: { id: string; workspaceId: string; amountUsd: string; idempotencyKey: string; expiresAt: Date }): Promise<ProviderDetails>;
  /**
   * The customer the workspace's saved methods belong to, created at the provider on first use
   * (Stripe); a provider without customers has none.
   */
  createCustomer?(workspaceId: string): Promise<string>;
  /** Starts the page where the user saves a card (`customerId`: the workspace's, when the provider has customers). */
  startSetup(setup: { id: string; workspaceId: string; expiresAt: Date; customerId?: string }): Promise<SetupDetails>;
  /**
   * Charges a saved method now, without the user (auto top-up). The charge id is the provider's
   * idempotency key: calling again with the same id never charges twice. Declines are
   * `{status: 'failed'}`; an outage (timeout, 5xx, network) throws `retryLater(…)`
   * (Unavailable), and the caller retries later with the same id.
   */
  chargeOffSession(charge: { id: string; workspaceId: string; amountUsd: string; method: SavedMethodRef }): Promise<ChargeOutcome>;
  /** Detaches a saved method at the provider (it can no longer be charged); already detached is done. */
  detach(method: SavedMethodRef): Promise<void>;
}

/** No provider configured (docs/api/billing.md#free-credit-and-the-sandbox): the operator has to choose one. */
export const noPaymentProvider = () =>
  apiError(
    Code.Unavailable,
    'payment_provider_unavailable',
    'No payment provider is configured on this deployment: the operator sets STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET (Stripe), or BILLING_SANDBOX=true (the sandbox, no real money).',
  );
