/**
 * The ledger's words: what each entry type is called on the page, and what its reference is
 * about (billing.proto, LedgerEntry). An unknown type (a newer API) is shown as the API names it.
 */

const typeWords: Record<string, string> = {
  free_credit: 'Free credit',
  topup: 'Top-up',
  auto_topup: 'Auto top-up',
  usage: 'Usage',
  refund: 'Refund',
  dispute: 'Lost dispute',
  adjustment: 'Adjustment',
  plan_fee: 'Plan fee',
};

const tierWords: Record<string, string> = { fast: 'Fast', balanced: 'Balanced', passthrough: 'Passthrough', byok: 'Your own provider key' };

export function ledgerTypeLabel(type: string): string {
  return typeWords[type] ?? type;
}

/** A usage entry's reference (`usage:<YYYY-MM-DD>:<tier>`) in words (`Fast tier, 2026-11-24 (UTC)`); undefined for any other reference. */
export function usageReferenceLabel(reference: string): string | undefined {
  const match = /^usage:(\d{4}-\d{2}-\d{2}):(\w+)$/.exec(reference);
  if (!match) return undefined;
  const [, day, tier] = match;
  return `${tierWords[tier] ?? tier} tier, ${day} (UTC)`;
}

/** Why the service switched auto top-up off (AutoTopup.disabled_reason), as a sentence that says what to do. */
export function disabledReasonText(reason: string): string {
  switch (reason) {
    case 'charge_failures':
      return 'Auto top-up was switched off after 3 failed charges in a row. Check the card, or save another, then switch it on again.';
    case 'payment_method_removed':
      return 'Auto top-up was switched off because its card was removed. Save a card, then switch it on again.';
    default:
      return `Auto top-up was switched off by the service (${reason}).`;
  }
}

const brandWords: Record<string, string> = {
  visa: 'Visa',
  mastercard: 'Mastercard',
  amex: 'American Express',
  discover: 'Discover',
  jcb: 'JCB',
  unionpay: 'UnionPay',
};

/** A saved card as people name it: `Visa •••• 4242`. */
export function cardLabel(brand: string, last4: string): string {
  const name = brandWords[brand.toLowerCase()] ?? (brand ? brand.charAt(0).toUpperCase() + brand.slice(1) : 'Card');
  return `${name} •••• ${last4}`;
}

/** A card's expiry as printed on it: `MM/YYYY`. */
export function cardExpiry(month: number, year: number): string {
  return `${String(month).padStart(2, '0')}/${year}`;
}
