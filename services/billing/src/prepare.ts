import { Code } from '@connectrpc/connect';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { ConsumerBarrier } from '@switchboard/runtime/consumer-barrier';
import { retryLater } from '@switchboard/runtime/errors';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { Money } from '@switchboard/runtime/money';
import { workSubjects } from '@switchboard/runtime/nats';
import { Pricing } from '@switchboard/runtime/pricing';
import type { ServiceRuntime } from '@switchboard/runtime/service';
import { Accounts } from './accounts.js';
import { AutoTopups } from './auto-topups.js';
import { BalanceLeases } from './balance-leases.js';
import type { BillingConfig } from './config.js';
import { Generations } from './generations.js';
import { KeyDirectory } from './key-directory.js';
import { SandboxProvider } from './providers/sandbox.js';
import { StripeProvider } from './providers/stripe.js';
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
  const autoTopups = new AutoTopups({
    db,
    log,
    accounts,
    recordEvent,
    // MERGE: ledger.post (type 'auto_topup'), which also writes the ledger entry and billing.balance.changed.
    post: async (trx, entry) => {
      const after = await adjustBalance(trx, entry.workspaceId, entry.amountUsd);
      return { entryId: '', balanceUsd: after.balanceUsd, beforeUsd: new Money(after.balanceUsd).minus(entry.amountUsd).toFixed(), version: after.version };
    },
    // MERGE: paymentMethods.defaultOf(db, workspaceId).
    defaultMethod: async () => undefined,
    // MERGE: provider.chargeOffSession(charge).
    charge: async () => {
      throw retryLater('payment_provider_unavailable', 'Off-session charges are not wired yet.', 60, Code.Unavailable);
    },
    // MERGE: recordProviderPayment of store/provider-payments.ts.
    recordProviderPayment: async () => undefined,
    providerName: provider.name,
    maxAmountUsd: config.topupMaxUsd,
    // The provider's own timeouts and retry end sooner; this bounds a call that never returns.
    chargeTimeoutMs: 3 * (config.stripe?.timeoutMs ?? 5000) + 1000,
    retryIntervalMs: config.autoTopupRetryIntervalMs,
  });
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
  return {
    pricing,
    // MERGE: the ledger calls the watchers (ledger.watch(autoTopups)); drop `watcher` here and in the settlement.
    usage: new UsageLedger({ db, pricing, accounts, keys, recordEvent, usageSettled, watcher: autoTopups }),
    leases: new BalanceLeases({ db, pricing, accounts, leaseTtlMs: config.leaseTtlMs }),
    reports: new Reports({ db, pricing, accounts, catalog, usageSettled }),
    generations: new Generations({ db, usageSettled }),
    topups,
    stripeWebhooks: new StripeWebhooks({ stripe, topups, log }),
    settlement: new UsageSettlement({ pricing, accounts, log, recordEvents, watcher: autoTopups }),
    autoTopups,
  };
}
