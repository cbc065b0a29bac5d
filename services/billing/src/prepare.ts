import { workDurable } from '@switchboard/contracts/nats-permissions';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { ConsumerBarrier } from '@switchboard/runtime/consumer-barrier';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { workSubjects } from '@switchboard/runtime/nats';
import { Pricing } from '@switchboard/runtime/pricing';
import type { ServiceRuntime } from '@switchboard/runtime/service';
import { Accounts } from './accounts.js';
import { AutoTopups } from './auto-topups.js';
import { BalanceLeases } from './balance-leases.js';
import type { BillingConfig } from './config.js';
import { FreeCredits } from './free-credit.js';
import { Generations } from './generations.js';
import { KeyDirectory } from './key-directory.js';
import { Ledger } from './ledger.js';
import { PaymentMethods } from './payment-methods.js';
import { noPaymentProvider, type PaymentProvider } from './providers/provider.js';
import { SandboxProvider } from './providers/sandbox.js';
import { StripeProvider } from './providers/stripe.js';
import { Refunds } from './refunds.js';
import { Reports } from './reports.js';
import type { BillingHandlers } from './server.js';
import { Statements } from './statements.js';
import { recordProviderPayment } from './store/provider-payments.js';
import { StripeWebhooks } from './stripe-webhooks.js';
import { Topups } from './topups.js';
import { UsageLedger } from './usage.js';
import { UsageReports } from './usage-report.js';
import { UsageSettlement } from './usage-settlement.js';

/** What the billing handlers are built from: the parts of the service runtime they use. */
export type BillingRuntime = Pick<ServiceRuntime, 'db' | 'log' | 'recordEvent' | 'recordEvents' | 'meshTokens' | 'audit'> & {
  config: Pick<ServiceRuntime['config'], 'dataKeys'> & Partial<Pick<ServiceRuntime['config'], 'workStream' | 'workSubjectPrefix'>>;
  /** With NATS, reads wait for the usage published before them to be settled (ConsumerBarrier). */
  nats?: ServiceRuntime['nats'];
};

/** The durable consumer that settles the data planes' usage (main.ts), which reads wait for. */
export const usageDurable = workDurable('billing', 'usage');

/** How long a payment-method setup page accepts a card (Stripe's longest Checkout Session). */
const setupTtlMs = 24 * 3_600_000;

/** The handlers, and what settles the usage of the work stream and grants the free credit in the background. */
export interface PreparedBilling extends BillingHandlers {
  settlement: UsageSettlement;
  /** Every change of a balance goes through it (the payment modules, the tests' assertions). */
  ledger: Ledger;
  freeCredits: FreeCredits;
}

/** The domain modules behind the billing handlers and consumers, as main.ts (and the in-process tests) builds them. */
export function prepareBilling(runtime: BillingRuntime, config: BillingConfig): PreparedBilling {
  const { db, log, recordEvent, recordEvents, meshTokens, audit } = runtime;
  const { dataKeys } = runtime.config;
  const pricing = Pricing.load(config.pricingFile);
  // SWITCHBOARD_MODELS_FILE: the model catalog whose prices GET /v1/billing/prices shows (a malformed one stops the start).
  const catalog = ModelCatalog.load();
  const accounts = new Accounts({ db, pricing, openingCreditUsd: config.openingCreditUsd });
  const ledger = new Ledger({ recordEvent });
  const keys = new KeyDirectory(createPeerClient(KeyService, { name: 'keys', url: config.keysUrl }, meshTokens, { caller: 'billing' }));
  // The sandbox exists only when it runs (docs/api/billing.md#free-credit-and-the-sandbox): without it its pages are 404.
  const sandbox = config.sandbox ? new SandboxProvider({ dataKeys, publicUrl: config.publicUrl }) : undefined;
  const stripe = config.stripe && new StripeProvider(config.stripe, log);
  const provider: PaymentProvider | undefined = stripe ?? sandbox;
  log.info({ pricing_version: pricing.version, provider: provider?.name ?? 'none', opening_credit_usd: config.openingCreditUsd }, 'billing prices loaded');
  if (!provider) {
    log.warn('no payment provider: top-ups answer 503 until STRIPE_SECRET_KEY (with STRIPE_WEBHOOK_SECRET) or BILLING_SANDBOX=true is set');
  }
  if (config.openingCreditIgnored) log.warn('SANDBOX_OPENING_CREDIT_USD is ignored: it only applies with BILLING_SANDBOX=true');
  const { nats, config: common } = runtime;
  const barrier =
    nats && common.workStream && common.workSubjectPrefix
      ? new ConsumerBarrier({ nats, stream: common.workStream, subject: workSubjects(common.workSubjectPrefix).usage, durable: usageDurable, log })
      : undefined;
  const usageSettled = barrier && (() => barrier.caughtUp());
  const autoTopups: AutoTopups = new AutoTopups({
    db,
    log,
    accounts,
    recordEvent,
    audit,
    post: (trx, entry) => ledger.post(trx, entry),
    defaultMethod: (db, workspaceId) => paymentMethods.defaultOf(db, workspaceId),
    charge: (charge) => {
      if (!provider) throw noPaymentProvider();
      return provider.chargeOffSession(charge);
    },
    recordProviderPayment,
    providerName: provider?.name,
    minimumChargeUsd: provider?.minimumChargeUsd,
    maxAmountUsd: config.topupMaxUsd,
    // The provider's own timeouts and retry end sooner; this bounds a call that never returns.
    chargeTimeoutMs: 3 * (config.stripe?.timeoutMs ?? 5000) + 1000,
    retryIntervalMs: config.autoTopupRetryIntervalMs,
  });
  // Every debit's move reaches auto top-up in the debit's transaction (docs/api/billing.md#auto-top-up).
  ledger.watch(autoTopups);
  const topups = new Topups({
    db,
    log,
    accounts,
    ledger,
    provider,
    sandbox,
    recordEvent,
    audit,
    maxAmountUsd: config.topupMaxUsd,
    checkoutTtlMs: config.checkoutTtlMs,
  });
  const paymentMethods: PaymentMethods = new PaymentMethods({
    db,
    log,
    accounts,
    provider,
    sandbox,
    stripe,
    recordEvent,
    setupTtlMs,
    onLastRemoved: (trx, workspaceId, userId) => autoTopups.paymentMethodsGone(trx, workspaceId, userId),
  });
  return {
    pricing,
    usage: new UsageLedger({ db, pricing, accounts, ledger, keys, recordEvent, usageSettled }),
    leases: new BalanceLeases({ db, pricing, accounts, leaseTtlMs: config.leaseTtlMs }),
    reports: new Reports({ db, pricing, accounts, catalog, usageSettled }),
    generations: new Generations({ db, usageSettled, audit }),
    usageReports: new UsageReports({ db, usageSettled }),
    topups,
    paymentMethods,
    stripeWebhooks: new StripeWebhooks({
      stripe,
      topups,
      paymentMethods,
      refunds: new Refunds({ db, log, post: (trx, entry) => ledger.post(trx, entry), recordEvent }),
      autoTopups,
      log,
    }),
    settlement: new UsageSettlement({ pricing, accounts, ledger, log, recordEvents }),
    statements: new Statements({ db, accounts, usageSettled }),
    ledger,
    freeCredits: new FreeCredits({ log, accounts, post: (trx, entry) => ledger.post(trx, entry), recordEvent, amountUsd: config.freeCreditUsd }),
    autoTopups,
  };
}
