import type { DataKeyRing } from '@switchboard/runtime/secrets';
import { sha256Hex } from '@switchboard/runtime/secrets';
import type { CheckoutRow } from '../store/checkouts.js';
import type { ChargeOutcome, PaymentProvider, ProviderDetails, SavedMethodRef, SetupDetails } from './provider.js';

/**
 * The built-in sandbox provider (docs/api/billing.md#sandbox): the checkout URL is a page of the gateway
 * (`GET /v1/billing/sandbox/checkout/{token}`) with a Pay button that completes the payment. The
 * token is the capability: 256 bits derived from the checkout id under the data keys (HMAC), so
 * the same URL can be answered again to a retry without storing the token; only its SHA-256 is
 * stored, to find the checkout.
 */
export const sandboxTokenPurpose = 'billing.sandbox-checkout';
/** The setup pages' tokens (`GET /v1/billing/sandbox/setup/{token}`), derived the same way under another purpose. */
export const sandboxSetupTokenPurpose = 'billing.sandbox-setup';

/** The sandbox's test cards: "4242" pays, "0341" saves fine but every charge is declined. */
export const sandboxCards = ['4242', '0341'] as const;
export type SandboxCard = (typeof sandboxCards)[number];

/** The sandbox's id of a saved test card: the card's number is in it, so a charge knows how to answer. */
export function sandboxMethodId(card: SandboxCard, setupId: string): string {
  return `sbx_card_${card}_${setupId}`;
}

export class SandboxProvider implements PaymentProvider {
  readonly name = 'sandbox';

  constructor(private readonly deps: { dataKeys: DataKeyRing; publicUrl: string }) {}

  async start(checkout: { id: string }): Promise<ProviderDetails> {
    const tokenKeyId = this.deps.dataKeys.currentKeyId;
    return { tokenHash: sha256Hex(this.token(checkout.id, tokenKeyId)), tokenKeyId };
  }

  async startSetup(setup: { id: string }): Promise<SetupDetails> {
    const tokenKeyId = this.deps.dataKeys.currentKeyId;
    return { tokenHash: sha256Hex(this.deps.dataKeys.derive(setup.id, sandboxSetupTokenPurpose, tokenKeyId)), tokenKeyId };
  }

  setupUrlOf(setup: { id: string; token_key_id: string | null }): string {
    const token = this.deps.dataKeys.derive(setup.id, sandboxSetupTokenPurpose, setup.token_key_id ?? this.deps.dataKeys.currentKeyId);
    return `${this.deps.publicUrl}/v1/billing/sandbox/setup/${token}`;
  }

  /** Test card 0341 is declined (`card_declined`); any other saved card pays, as `sbx_pi_<charge id>`. */
  async chargeOffSession(charge: { id: string; method: SavedMethodRef }): Promise<ChargeOutcome> {
    if (charge.method.providerMethodId.startsWith('sbx_card_0341_')) return { status: 'failed', reason: 'card_declined' };
    return { status: 'succeeded', providerPaymentId: `sbx_pi_${charge.id}` };
  }

  /** Nothing is held anywhere else. */
  async detach(): Promise<void> {}

  urlOf(row: CheckoutRow): string {
    return `${this.deps.publicUrl}/v1/billing/sandbox/checkout/${this.token(row.id, row.token_key_id ?? this.deps.dataKeys.currentKeyId)}`;
  }

  private token(checkoutId: string, keyId: string): string {
    return this.deps.dataKeys.derive(checkoutId, sandboxTokenPurpose, keyId);
  }
}
