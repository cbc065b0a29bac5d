/**
 * The checkout URL of a top-up (the API's `checkout_url`: the sandbox page or Stripe Checkout)
 * as an address the page may send the user to: http(s) only, so a `javascript:` URL can never
 * run in the dashboard's origin.
 */
export function safeCheckoutUrl(checkoutUrl: string): string | undefined {
  try {
    const url = new URL(checkoutUrl, window.location.href);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : undefined;
  } catch {
    return undefined;
  }
}
