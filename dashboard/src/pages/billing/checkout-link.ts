/** The paths of the sandbox's pages (a top-up's checkout, a card's setup), served by the same gateway as this dashboard. */
const sandboxPaths = ['/v1/billing/sandbox/checkout/', '/v1/billing/sandbox/setup/'];

/**
 * The checkout URL of a top-up (the API's `checkout_url`: the sandbox page or Stripe Checkout), or
 * the setup URL of a card to save (`setup_url`, the same two kinds of page), as an address the page may send the user to: http(s) only, so a `javascript:` URL can never
 * run in the dashboard's origin. The sandbox's page stays on this page's origin: the gateway's
 * PUBLIC_BASE_URL may name it otherwise (localhost for 127.0.0.1), and the page's relative link
 * back must land where the session cookie is (docs/api/identity.md#the-dashboards-session-cookie).
 */
export function safeCheckoutUrl(checkoutUrl: string): string | undefined {
  try {
    const url = new URL(checkoutUrl, window.location.href);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
    return sandboxPaths.some((sandbox) => url.pathname.startsWith(sandbox)) ? new URL(`${url.pathname}${url.search}`, window.location.origin).href : url.href;
  } catch {
    return undefined;
  }
}
