import type { DataKeyRing } from '@switchboard/runtime/secrets';
import { sha256Hex } from '@switchboard/runtime/secrets';
import type { CheckoutRow } from '../store/checkouts.js';
import type { PaymentProvider, ProviderDetails } from './provider.js';

/**
 * The built-in sandbox provider (docs/api/billing.md#sandbox): the checkout URL is a page of the gateway
 * (`GET /v1/billing/sandbox/checkout/{token}`) with a Pay button that completes the payment. The
 * token is the capability: 256 bits derived from the checkout id under the data keys (HMAC), so
 * the same URL can be answered again to a retry without storing the token; only its SHA-256 is
 * stored, to find the checkout.
 */
export const sandboxTokenPurpose = 'billing.sandbox-checkout';

export class SandboxProvider implements PaymentProvider {
  readonly name = 'sandbox';

  constructor(private readonly deps: { dataKeys: DataKeyRing; publicUrl: string }) {}

  async start(checkout: { id: string }): Promise<ProviderDetails> {
    const tokenKeyId = this.deps.dataKeys.currentKeyId;
    return { tokenHash: sha256Hex(this.token(checkout.id, tokenKeyId)), tokenKeyId };
  }

  urlOf(row: CheckoutRow): string {
    return `${this.deps.publicUrl}/v1/billing/sandbox/checkout/${this.token(row.id, row.token_key_id ?? this.deps.dataKeys.currentKeyId)}`;
  }

  private token(checkoutId: string, keyId: string): string {
    return this.deps.dataKeys.derive(checkoutId, sandboxTokenPurpose, keyId);
  }
}
