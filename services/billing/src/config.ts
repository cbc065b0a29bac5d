import { servicePorts } from '@switchboard/contracts/components';
import { readDuration, readString, serviceUrl } from '@switchboard/runtime/config';
import { parsePlainDecimal } from '@switchboard/runtime/money';
import { defaultPricingPath } from '@switchboard/runtime/pricing';
import { readStripeSettings, type StripeSettings } from './providers/stripe.js';

/**
 * The settings of the billing service (docs/operations.md), read once at start by main.ts and
 * passed down; a malformed value stops the start, naming its variable.
 */
export interface BillingConfig {
  /** SWITCHBOARD_PRICING_FILE: the versioned prices and plans, the data plane's too (default: runtime/pricing.json). */
  pricingFile: string;
  /** FREE_CREDIT_USD: the credit of a new workspace. */
  freeCreditUsd: string;
  /** KEYS_URL: where the keys service answers. */
  keysUrl: string;
  /** PUBLIC_BASE_URL: where users reach the gateway (the sandbox checkout page is one of its routes), without a trailing slash. */
  publicUrl: string;
  /** STRIPE_SECRET_KEY and the rest: new checkouts go to Stripe Checkout when set, else to the sandbox. */
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

export function readBillingConfig(env: Record<string, string | undefined> = process.env): BillingConfig {
  const publicUrl = readString('PUBLIC_BASE_URL', 'http://localhost:8080', env).replace(/\/+$/, '');
  return {
    pricingFile: readString('SWITCHBOARD_PRICING_FILE', defaultPricingPath, env),
    freeCreditUsd: parsePlainDecimal(readString('FREE_CREDIT_USD', '1.00', env), 'FREE_CREDIT_USD'),
    keysUrl: serviceUrl('keys', servicePorts.keys, env),
    publicUrl,
    stripe: readStripeSettings(publicUrl, env),
    topupMaxUsd: parsePlainDecimal(readString('TOPUP_MAX_USD', '10000', env), 'TOPUP_MAX_USD'),
    checkoutTtlMs: readDuration('CHECKOUT_TTL', '24h', env),
    // Below a second a lease would lapse between two renewals of a busy replica.
    leaseTtlMs: readDuration('LEASE_TTL', '30s', env, 1000),
    housekeepingIntervalMs: readDuration('HOUSEKEEPING_INTERVAL', '1h', env, 1),
    autoTopupRetryIntervalMs: readDuration('AUTO_TOPUP_RETRY_INTERVAL', '30s', env, 100),
  };
}
