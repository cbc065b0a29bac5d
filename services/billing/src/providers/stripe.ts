import { Code } from '@connectrpc/connect';
import { ConfigError, readDuration, readString } from '@switchboard/runtime/config';
import { apiError, retryLater } from '@switchboard/runtime/errors';
import type { Logger } from '@switchboard/runtime/log';
import Stripe from 'stripe';
import type { PaymentProvider, ProviderDetails } from './provider.js';

/**
 * Stripe Checkout (docs/api/billing.md#stripe-checkout), on when STRIPE_SECRET_KEY is set: `start` creates a Checkout Session
 * (one USD line item for the top-up) and the user pays on Stripe's page; Stripe then calls
 * `POST /v1/billing/providers/stripe/webhook`, whose events `verify` authenticates with the
 * endpoint's signing secret (STRIPE_WEBHOOK_SECRET).
 *
 *  - Every call to Stripe has a timeout and at most one retry, both short enough that a create
 *    ends within the gateway's 10 s deadline; a retry (ours or the library's) reuses Stripe's
 *    idempotency key, our checkout id, so it never makes a second session.
 *  - Amounts go to Stripe in cents, converted from the decimal string digit by digit (no float).
 */

export interface StripeSettings {
  secretKey: string;
  webhookSecret: string;
  /** Where Stripe sends the user after paying / giving up (`checkout_id` is added to the query). */
  successUrl: string;
  cancelUrl: string;
  /** Per request, in ms. */
  timeoutMs: number;
  /** How old a signed event may be (seconds); older deliveries are refused as replays. */
  toleranceSeconds: number;
  /** Another Stripe API endpoint (stripe-mock, a test double), e.g. http://127.0.0.1:12111. */
  apiBase?: string;
}

/**
 * The Stripe settings of the environment, or undefined when STRIPE_SECRET_KEY is unset (the
 * sandbox takes the payments). A secret key without the webhook signing secret is a ConfigError:
 * payments would be taken but never credited.
 */
export function readStripeSettings(publicUrl: string, env: Record<string, string | undefined>): StripeSettings | undefined {
  const secretKey = env.STRIPE_SECRET_KEY;
  if (!secretKey) return undefined;
  if (!env.STRIPE_WEBHOOK_SECRET) {
    throw new ConfigError(
      'STRIPE_WEBHOOK_SECRET is required when STRIPE_SECRET_KEY is set: the signing secret (whsec_…) of the Stripe webhook endpoint ' +
        'POST /v1/billing/providers/stripe/webhook; without it no payment could be credited',
    );
  }
  const apiBase = env.STRIPE_API_BASE || undefined;
  if (apiBase && !/^https?:\/\/[^/]+\/?$/.test(apiBase))
    throw new ConfigError(`STRIPE_API_BASE must be a URL such as http://127.0.0.1:12111, got "${apiBase}"`);
  // The dashboard's billing page shows how the top-up went, whether it was paid or not.
  const successUrl = readString('STRIPE_SUCCESS_URL', `${publicUrl}/app/billing`, env);
  const cancelUrl = readString('STRIPE_CANCEL_URL', `${publicUrl}/app/billing`, env);
  for (const [name, url] of [
    ['STRIPE_SUCCESS_URL', successUrl],
    ['STRIPE_CANCEL_URL', cancelUrl],
  ]) {
    if (!URL.canParse(url)) throw new ConfigError(`${name} must be an absolute URL, got "${url}"`);
  }
  return {
    secretKey,
    webhookSecret: env.STRIPE_WEBHOOK_SECRET,
    successUrl,
    cancelUrl,
    timeoutMs: readDuration('STRIPE_TIMEOUT', '4s', env),
    toleranceSeconds: Math.floor(readDuration('STRIPE_WEBHOOK_TOLERANCE', '300s', env) / 1000),
    apiBase,
  };
}

/** "12.5" → 1250: an amount of at most 2 decimals in USD cents, exactly (never through a float). */
export function usdToCents(amountUsd: string): number {
  const match = /^(\d+)(?:\.(\d{1,2}))?$/.exec(amountUsd);
  if (!match) throw new Error(`not a USD amount with at most 2 decimals: "${amountUsd}"`);
  const cents = Number(`${match[1]}${(match[2] ?? '').padEnd(2, '0')}`);
  if (!Number.isSafeInteger(cents)) throw new Error(`USD amount too large: "${amountUsd}"`);
  return cents;
}

/** Stripe accepts a session expiry between 30 minutes and 24 hours from now. */
const minSessionMs = 30 * 60_000 + 60_000;
const maxSessionMs = 24 * 3_600_000 - 60_000;

/** `url` with the checkout's workspace and id added to its query (the dashboard opens that workspace and shows the top-up). */
function returnUrl(url: string, checkout: { id: string; workspaceId: string }): string {
  const parsed = new URL(url);
  parsed.searchParams.set('workspace_id', checkout.workspaceId);
  parsed.searchParams.set('checkout_id', checkout.id);
  return parsed.toString();
}

export class StripeProvider implements PaymentProvider {
  readonly name = 'stripe';
  private readonly stripe: Stripe;

  constructor(
    private readonly settings: StripeSettings,
    private readonly log: Logger,
  ) {
    const api = settings.apiBase ? new URL(settings.apiBase) : undefined;
    this.stripe = new Stripe(settings.secretKey, {
      timeout: settings.timeoutMs,
      maxNetworkRetries: 1,
      telemetry: false,
      ...(api && { host: api.hostname, port: api.port || (api.protocol === 'https:' ? 443 : 80), protocol: api.protocol === 'https:' ? 'https' : 'http' }),
    });
  }

  async start(checkout: { id: string; workspaceId: string; amountUsd: string; expiresAt?: Date }): Promise<ProviderDetails> {
    const metadata = { checkout_id: checkout.id, workspace_id: checkout.workspaceId };
    // The session must not stay payable after the checkout expires (within Stripe's bounds).
    const now = Date.now();
    const until = Math.min(Math.max((checkout.expiresAt?.getTime() ?? now + maxSessionMs) - now, minSessionMs), maxSessionMs);
    try {
      const session = await this.stripe.checkout.sessions.create(
        {
          mode: 'payment',
          line_items: [
            {
              quantity: 1,
              price_data: { currency: 'usd', unit_amount: usdToCents(checkout.amountUsd), product_data: { name: 'Switchboard balance top-up' } },
            },
          ],
          client_reference_id: checkout.id,
          metadata,
          payment_intent_data: { metadata },
          success_url: returnUrl(this.settings.successUrl, checkout),
          cancel_url: returnUrl(this.settings.cancelUrl, checkout),
          expires_at: Math.floor((now + until) / 1000),
        },
        { idempotencyKey: checkout.id },
      );
      if (!session.url) throw new Error(`Stripe answered session ${session.id} without a URL`);
      return { checkoutUrl: session.url, providerSessionId: session.id };
    } catch (err) {
      const stripeError = err instanceof Stripe.errors.StripeError ? err : undefined;
      this.log.error(
        {
          err: stripeError ? undefined : err,
          stripe_error: stripeError && {
            type: stripeError.type,
            code: stripeError.code,
            status: stripeError.statusCode,
            request_id: stripeError.requestId,
            message: stripeError.message,
          },
          checkout_id: checkout.id,
        },
        'creating the Stripe Checkout Session failed',
      );
      throw retryLater(
        'payment_provider_unavailable',
        'The payment provider could not start this payment; try again shortly (same idempotency_key).',
        5,
        Code.Unavailable,
      );
    }
  }

  /**
   * The event of a webhook delivery, after checking its Stripe-Signature against the raw body and
   * the signing secret (and that it is at most `toleranceSeconds` old); 400 `invalid_signature`
   * otherwise.
   */
  verify(rawBody: Uint8Array, signature: string): Stripe.Event {
    try {
      return this.stripe.webhooks.constructEvent(rawBody, signature, this.settings.webhookSecret, this.settings.toleranceSeconds);
    } catch (err) {
      if (err instanceof Stripe.errors.StripeSignatureVerificationError) {
        throw apiError(Code.InvalidArgument, 'invalid_signature', 'The Stripe-Signature header does not match this body and signing secret, or is too old.');
      }
      if (err instanceof SyntaxError) throw apiError(Code.InvalidArgument, 'invalid_request', 'The event is not valid JSON.');
      throw err;
    }
  }
}
