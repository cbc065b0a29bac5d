import { servicePorts } from '@switchboard/contracts/components';
import { ConfigError, readBool, readDuration, readString, serviceUrl } from '@switchboard/runtime/config';
import { Money, parsePlainDecimal } from '@switchboard/runtime/money';
import { defaultPricingPath } from '@switchboard/runtime/pricing';
import { readStripeSettings, type StripeSettings } from './providers/stripe.js';

/**
 * The settings of the billing service (docs/operations.md), read once at start by main.ts and
 * passed down; a malformed value stops the start, naming its variable.
 */
export interface BillingConfig {
  /** SWITCHBOARD_PRICING_FILE: the versioned prices and plans, the data plane's too (default: runtime/pricing.json). */
  pricingFile: string;
  /** FREE_CREDIT_USD: the credit granted once per user, to their personal workspace, when their email is verified. */
  freeCreditUsd: string;
  /**
   * BILLING_SANDBOX=true and no Stripe: the built-in sandbox provider takes the payments, and its
   * pages (checkout, card setup) answer. False otherwise: their routes are 404.
   */
  sandbox: boolean;
  /**
   * SANDBOX_OPENING_CREDIT_USD: the credit every new account opens with, honoured only with
   * BILLING_SANDBOX=true (a development and test convenience, like paying a sandbox checkout); "0" otherwise.
   */
  openingCreditUsd: string;
  /** SANDBOX_OPENING_CREDIT_USD was set but BILLING_SANDBOX is not true: ignored (prepare.ts says so in the log). */
  openingCreditIgnored: boolean;
  /** KEYS_URL: where the keys service answers. */
  keysUrl: string;
  /** PUBLIC_BASE_URL: where users reach the gateway (the sandbox checkout page is one of its routes), without a trailing slash. */
  publicUrl: string;
  /** STRIPE_SECRET_KEY and the rest: new checkouts go to Stripe Checkout when set, else to the sandbox (BILLING_SANDBOX=true), else nowhere (503). */
  stripe?: StripeSettings;
  /** TOPUP_MAX_USD: the largest single top-up. */
  topupMaxUsd: string;
  /** CHECKOUT_TTL: how long a checkout may be paid. */
  checkoutTtlMs: number;
  /** LEASE_TTL: how long a balance lease holds its grant unless renewed. */
  leaseTtlMs: number;
  /** HOUSEKEEPING_INTERVAL: how often long-expired leases are deleted. */
  housekeepingIntervalMs: number;
  /** AUTO_TOPUP_RETRY_INTERVAL: how long an unanswered auto top-up charge waits before it is attempted again (same idempotency key). */
  autoTopupRetryIntervalMs: number;
}

/**
 * The payment provider guard (docs/api/billing.md#free-credit-and-the-sandbox): Stripe when
 * STRIPE_SECRET_KEY is set (the sandbox routes are then 404, whatever BILLING_SANDBOX says); else
 * the sandbox only with BILLING_SANDBOX=true. In production neither is a ConfigError naming both:
 * a deployment must never take play money by omission. Outside production neither starts, and
 * top-ups answer 503 `payment_provider_unavailable`.
 */
function readProviderChoice(env: Record<string, string | undefined>, stripe: StripeSettings | undefined) {
  const sandboxOn = readBool('BILLING_SANDBOX', false, env);
  const production = env.NODE_ENV === 'production';
  if (production && !stripe && !sandboxOn) {
    throw new ConfigError(
      'billing needs a payment provider with NODE_ENV=production: set STRIPE_SECRET_KEY (with STRIPE_WEBHOOK_SECRET) for Stripe Checkout, ' +
        'or BILLING_SANDBOX=true to run the built-in sandbox provider, whose payments move no money',
    );
  }
  const rawOpening = env.SANDBOX_OPENING_CREDIT_USD;
  const opening = rawOpening === undefined || rawOpening === '' ? '0' : parsePlainDecimal(rawOpening, 'SANDBOX_OPENING_CREDIT_USD');
  if (production && !new Money(opening).eq(0)) {
    throw new ConfigError(
      'SANDBOX_OPENING_CREDIT_USD is refused with NODE_ENV=production: it opens every new account with credit nobody paid for; unset it (the free credit is FREE_CREDIT_USD, granted on email verification)',
    );
  }
  return {
    sandbox: sandboxOn && !stripe,
    openingCreditUsd: sandboxOn ? opening : '0',
    openingCreditIgnored: !sandboxOn && !new Money(opening).eq(0),
  };
}

export function readBillingConfig(env: Record<string, string | undefined> = process.env): BillingConfig {
  const publicUrl = readString('PUBLIC_BASE_URL', 'http://localhost:8080', env).replace(/\/+$/, '');
  const stripe = readStripeSettings(publicUrl, env);
  return {
    pricingFile: readString('SWITCHBOARD_PRICING_FILE', defaultPricingPath, env),
    freeCreditUsd: parsePlainDecimal(readString('FREE_CREDIT_USD', '1.00', env), 'FREE_CREDIT_USD'),
    ...readProviderChoice(env, stripe),
    keysUrl: serviceUrl('keys', servicePorts.keys, env),
    publicUrl,
    stripe,
    topupMaxUsd: parsePlainDecimal(readString('TOPUP_MAX_USD', '10000', env), 'TOPUP_MAX_USD'),
    checkoutTtlMs: readDuration('CHECKOUT_TTL', '24h', env),
    // Below a second a lease would lapse between two renewals of a busy replica.
    leaseTtlMs: readDuration('LEASE_TTL', '30s', env, 1000),
    housekeepingIntervalMs: readDuration('HOUSEKEEPING_INTERVAL', '1h', env, 1),
    autoTopupRetryIntervalMs: readDuration('AUTO_TOPUP_RETRY_INTERVAL', '30s', env, 100),
  };
}
