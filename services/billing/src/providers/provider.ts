/** What a provider keeps of a new payment (see the columns of `checkouts`). */
export interface ProviderDetails {
  checkoutUrl?: string;
  providerSessionId?: string;
  tokenHash?: string;
  tokenKeyId?: string;
}

/**
 * A payment provider behind one interface (docs/api/billing.md#payment-providers): Stripe Checkout when configured, else the
 * built-in sandbox. `start` runs inside the transaction that inserted the checkout, so a retry
 * with the same idempotency key waits for it and finds the payment already started.
 */
export interface PaymentProvider {
  readonly name: 'sandbox' | 'stripe';
  start(checkout: { id: string; workspaceId: string; amountUsd: string; idempotencyKey: string; expiresAt: Date }): Promise<ProviderDetails>;
}
