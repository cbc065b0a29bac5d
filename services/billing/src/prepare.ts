import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { ConsumerBarrier } from '@switchboard/runtime/consumer-barrier';
import { newId } from '@switchboard/runtime/ids';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { formatMoney, Money } from '@switchboard/runtime/money';
import { workSubjects } from '@switchboard/runtime/nats';
import { Pricing } from '@switchboard/runtime/pricing';
import type { ServiceRuntime } from '@switchboard/runtime/service';
import { Accounts } from './accounts.js';
import { BalanceLeases } from './balance-leases.js';
import type { BillingConfig } from './config.js';
import { Generations } from './generations.js';
import { KeyDirectory } from './key-directory.js';
import { PaymentMethods } from './payment-methods.js';
import { SandboxProvider } from './providers/sandbox.js';
import { StripeProvider } from './providers/stripe.js';
import { type LedgerPost, Refunds } from './refunds.js';
import { Reports } from './reports.js';
import type { BillingHandlers } from './server.js';
import { adjustBalance } from './store/accounts.js';
import { StripeWebhooks } from './stripe-webhooks.js';
import { Topups } from './topups.js';
import { UsageLedger } from './usage.js';
import { UsageSettlement } from './usage-settlement.js';

/** What the billing handlers are built from: the parts of the service runtime they use. */
export type BillingRuntime = Pick<ServiceRuntime, 'db' | 'log' | 'recordEvent' | 'recordEvents' | 'meshTokens'> & {
  config: Pick<ServiceRuntime['config'], 'dataKeys'> & Partial<Pick<ServiceRuntime['config'], 'workStream' | 'workSubjectPrefix'>>;
  /** With NATS, reads wait for the usage published before them to be settled (ConsumerBarrier). */
  nats?: ServiceRuntime['nats'];
};

/** The durable consumer that settles the data planes' usage (main.ts), which reads wait for. */
export const usageDurable = 'billing-usage';

/** How long a payment-method setup page accepts a card (Stripe's longest Checkout Session). */
const setupTtlMs = 24 * 3_600_000;

// LEDGER: a stand-in of Ledger.post until the ledger lands; the lead swaps it for `ledger.post`.
const postToBalance: LedgerPost = async (trx, entry) => {
  const change = await adjustBalance(trx, entry.workspaceId, entry.amountUsd);
  return {
    entryId: newId('led'),
    balanceUsd: change.balanceUsd,
    beforeUsd: formatMoney(new Money(change.balanceUsd).minus(entry.amountUsd)),
    version: change.version,
  };
};

/** The handlers, and what settles the usage of the work stream in the background. */
export interface PreparedBilling extends BillingHandlers {
  settlement: UsageSettlement;
}

/** The domain modules behind the billing handlers and consumers, as main.ts (and the in-process tests) builds them. */
export function prepareBilling(runtime: BillingRuntime, config: BillingConfig): PreparedBilling {
  const { db, log, recordEvent, recordEvents, meshTokens } = runtime;
  const { dataKeys } = runtime.config;
  const pricing = Pricing.load(config.pricingFile);
  // SWITCHBOARD_MODELS_FILE: the model catalog whose prices GET /v1/billing/prices shows (a malformed one stops the start).
  const catalog = ModelCatalog.load();
  const accounts = new Accounts({ db, pricing, freeCreditUsd: config.freeCreditUsd });
  const keys = new KeyDirectory(createPeerClient(KeyService, { name: 'keys', url: config.keysUrl }, meshTokens, { caller: 'billing' }));
  const sandbox = new SandboxProvider({ dataKeys, publicUrl: config.publicUrl });
  const stripe = config.stripe && new StripeProvider(config.stripe, log);
  const provider = stripe ?? sandbox;
  log.info({ pricing_version: pricing.version, provider: provider.name }, 'billing prices loaded');
  const { nats, config: common } = runtime;
  const barrier =
    nats && common.workStream && common.workSubjectPrefix
      ? new ConsumerBarrier({ nats, stream: common.workStream, subject: workSubjects(common.workSubjectPrefix).usage, durable: usageDurable, log })
      : undefined;
  const usageSettled = barrier && (() => barrier.caughtUp());
  const topups = new Topups({
    db,
    log,
    accounts,
    provider,
    sandbox,
    recordEvent,
    maxAmountUsd: config.topupMaxUsd,
    checkoutTtlMs: config.checkoutTtlMs,
  });
  const paymentMethods = new PaymentMethods({
    db,
    log,
    accounts,
    provider,
    sandbox,
    stripe,
    recordEvent,
    setupTtlMs,
    // AUTO-TOPUP: AutoTopups.paymentMethodsGone is wired here when it lands.
    onLastRemoved: undefined,
  });
  return {
    pricing,
    usage: new UsageLedger({ db, pricing, accounts, keys, recordEvent, usageSettled }),
    leases: new BalanceLeases({ db, pricing, accounts, leaseTtlMs: config.leaseTtlMs }),
    reports: new Reports({ db, pricing, accounts, catalog, usageSettled }),
    generations: new Generations({ db, usageSettled }),
    topups,
    paymentMethods,
    stripeWebhooks: new StripeWebhooks({
      stripe,
      db,
      topups,
      paymentMethods,
      refunds: new Refunds({ db, log, post: postToBalance, recordEvent }),
      // AUTO-TOPUP: AutoTopups (chargeSucceeded / chargeFailed) is wired here when it lands.
      autoTopups: undefined,
      log,
    }),
    settlement: new UsageSettlement({ pricing, accounts, log, recordEvents }),
  };
}
