import { Code, ConnectError } from '@connectrpc/connect';
import { ConfigError, readDuration, readString } from '@switchboard/runtime/config';
import { apiError, retryLater } from '@switchboard/runtime/errors';
import type { Logger } from '@switchboard/runtime/log';
import Stripe from 'stripe';
import type { ChargeOutcome, PaymentProvider, ProviderDetails, SavedMethodRef, SetupDetails } from './provider.js';

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
 *  - Saved cards (docs/api/billing.md#payment-methods): a Customer per workspace (idempotency key
 *    `customer-<workspace>`), Checkout in setup mode for it, off-session PaymentIntents keyed by
 *    the auto top-up charge id. Stripe failing or not answering is 503 `payment_provider_unavailable`.
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
  // The secret key travels with every call: never in clear text in production.
  if (apiBase?.startsWith('http:') && env.NODE_ENV === 'production')
    throw new ConfigError(`STRIPE_API_BASE must be an https URL with NODE_ENV=production, got "${apiBase}"`);
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

/** 1250 → "12.50": cents back to a decimal string, exactly. */
export function centsToUsd(cents: number): string {
  if (!Number.isSafeInteger(cents) || cents < 0) throw new Error(`not an amount in cents: ${cents}`);
  const digits = String(cents).padStart(3, '0');
  return `${digits.slice(0, -2)}.${digits.slice(-2)}`;
}

/** What Stripe tells of a saved card. */
export interface SavedCard {
  providerMethodId: string;
  providerCustomerId: string | null;
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
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

/** `url` with the setup's workspace and id added to its query (the dashboard shows the saved card). */
function setupReturnUrl(url: string, setup: { id: string; workspaceId: string }): string {
  const parsed = new URL(url);
  parsed.searchParams.set('workspace_id', setup.workspaceId);
  parsed.searchParams.set('setup_id', setup.id);
  return parsed.toString();
}

export class StripeProvider implements PaymentProvider {
  readonly name = 'stripe';
  // Stripe refuses card charges below 0.50 USD: refused here, on the field, instead of a 503 from Stripe.
  readonly minimumChargeUsd = '0.50';
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
      throw this.unavailable(
        err,
        'creating the Stripe Checkout Session failed',
        { checkout_id: checkout.id },
        'The payment provider could not start this payment; try again shortly (same idempotency_key).',
      );
    }
  }

  async createCustomer(workspaceId: string): Promise<string> {
    try {
      const customer = await this.stripe.customers.create(
        { metadata: { workspace_id: workspaceId }, description: `Switchboard workspace ${workspaceId}` },
        { idempotencyKey: `customer-${workspaceId}` },
      );
      return customer.id;
    } catch (err) {
      throw this.unavailable(err, 'creating the Stripe Customer failed', { workspace_id: workspaceId });
    }
  }

  async startSetup(setup: { id: string; workspaceId: string; expiresAt: Date; customerId?: string }): Promise<SetupDetails> {
    if (!setup.customerId) throw new Error('a Stripe setup needs the workspace customer');
    const metadata = { setup_id: setup.id, workspace_id: setup.workspaceId };
    const now = Date.now();
    const until = Math.min(Math.max(setup.expiresAt.getTime() - now, minSessionMs), maxSessionMs);
    const back = { id: setup.id, workspaceId: setup.workspaceId };
    try {
      const session = await this.stripe.checkout.sessions.create(
        {
          mode: 'setup',
          customer: setup.customerId,
          currency: 'usd',
          // Auto top-up charges cards off-session; other methods may need the payer present.
          allowed_payment_method_types: ['card'],
          client_reference_id: setup.id,
          metadata,
          setup_intent_data: { metadata },
          success_url: setupReturnUrl(this.settings.successUrl, back),
          cancel_url: setupReturnUrl(this.settings.cancelUrl, back),
          expires_at: Math.floor((now + until) / 1000),
        },
        { idempotencyKey: setup.id },
      );
      if (!session.url) throw new Error(`Stripe answered session ${session.id} without a URL`);
      return { setupUrl: session.url, providerSessionId: session.id };
    } catch (err) {
      throw this.unavailable(err, 'creating the Stripe setup session failed', { setup_id: setup.id });
    }
  }

  /** The card a completed setup saved: its SetupIntent's PaymentMethod. */
  async savedCard(setupIntentId: string): Promise<SavedCard> {
    try {
      const intent = await this.stripe.setupIntents.retrieve(setupIntentId);
      const methodId = typeof intent.payment_method === 'string' ? intent.payment_method : intent.payment_method?.id;
      if (!methodId) throw new Error(`SetupIntent ${setupIntentId} has no payment method`);
      const method = await this.stripe.paymentMethods.retrieve(methodId);
      const customer = typeof method.customer === 'string' ? method.customer : (method.customer?.id ?? null);
      return {
        providerMethodId: method.id,
        providerCustomerId: customer ?? (typeof intent.customer === 'string' ? intent.customer : null),
        brand: method.card?.brand ?? method.type,
        last4: method.card?.last4 ?? '',
        expMonth: method.card?.exp_month ?? 0,
        expYear: method.card?.exp_year ?? 0,
      };
    } catch (err) {
      throw this.unavailable(err, 'reading the saved card from Stripe failed', { setup_intent: setupIntentId });
    }
  }

  async chargeOffSession(charge: { id: string; workspaceId: string; amountUsd: string; method: SavedMethodRef }): Promise<ChargeOutcome> {
    const metadata = { auto_topup_charge_id: charge.id, workspace_id: charge.workspaceId };
    try {
      const intent = await this.stripe.paymentIntents.create(
        {
          amount: usdToCents(charge.amountUsd),
          currency: 'usd',
          ...(charge.method.providerCustomerId && { customer: charge.method.providerCustomerId }),
          payment_method: charge.method.providerMethodId,
          off_session: true,
          confirm: true,
          description: 'Switchboard auto top-up',
          metadata,
        },
        { idempotencyKey: charge.id },
      );
      if (intent.status === 'succeeded') return { status: 'succeeded', providerPaymentId: intent.id };
      if (intent.status === 'requires_payment_method' || intent.status === 'canceled') {
        return {
          status: 'failed',
          reason: intent.last_payment_error?.decline_code ?? intent.last_payment_error?.code ?? intent.status,
          providerPaymentId: intent.id,
        };
      }
      // processing, requires_action…: not settled yet; the webhook (payment_intent.*) or a retry tells.
      throw retryLater('payment_provider_unavailable', `The payment ${intent.id} is ${intent.status}; it is checked again later.`, 5, Code.Unavailable);
    } catch (err) {
      if (err instanceof Stripe.errors.StripeCardError) {
        const intentId = err.payment_intent?.id;
        return { status: 'failed', reason: err.decline_code ?? err.code ?? 'card_declined', ...(intentId && { providerPaymentId: intentId }) };
      }
      if (
        err instanceof Stripe.errors.StripeInvalidRequestError &&
        err.statusCode !== undefined &&
        err.statusCode < 500 &&
        err.statusCode !== 409 &&
        err.statusCode !== 429
      ) {
        // The method cannot be charged at all (detached, deleted, not the customer's).
        this.log.warn(
          { stripe_error: { type: err.type, code: err.code, status: err.statusCode, message: err.message }, charge_id: charge.id },
          'Stripe refused the off-session charge',
        );
        return { status: 'failed', reason: err.code ?? 'payment_method_unusable' };
      }
      throw this.unavailable(err, 'the off-session Stripe charge failed', { charge_id: charge.id });
    }
  }

  async detach(method: SavedMethodRef): Promise<void> {
    try {
      await this.stripe.paymentMethods.detach(method.providerMethodId, {}, { idempotencyKey: `detach-${method.id}` });
    } catch (err) {
      // Already detached or gone at Stripe: what we wanted.
      if (err instanceof Stripe.errors.StripeInvalidRequestError && (err.statusCode === 400 || err.statusCode === 404)) {
        this.log.info({ payment_method_id: method.id, stripe_code: err.code }, 'Stripe payment method already detached');
        return;
      }
      throw this.unavailable(err, 'detaching the Stripe payment method failed', { payment_method_id: method.id });
    }
  }

  /** Logs what Stripe answered (or that it did not) and returns the 503 the caller answers. */
  private unavailable(
    err: unknown,
    message: string,
    facts: Record<string, unknown>,
    answer = 'The payment provider did not answer or failed; try again shortly (a retry never charges twice).',
  ) {
    if (err instanceof ConnectError) return err;
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
        ...facts,
      },
      message,
    );
    return retryLater('payment_provider_unavailable', answer, 5, Code.Unavailable);
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
