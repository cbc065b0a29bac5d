import { fileURLToPath } from 'node:url';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { readDuration, readString, serviceUrl } from '@switchboard/runtime/config';
import { parsePlainDecimal } from '@switchboard/runtime/money';
import { runService } from '@switchboard/runtime/service';
import { Accounts } from './accounts.js';
import { KeyDirectory } from './key-directory.js';
import { Pricing } from './pricing.js';
import { SandboxProvider } from './providers/sandbox.js';
import { readStripeSettings, StripeProvider } from './providers/stripe.js';
import { Reports } from './reports.js';
import { type BillingHandlers, registerRoutes } from './server.js';
import { StripeWebhooks } from './stripe-webhooks.js';
import { Topups } from './topups.js';
import { UsageLedger } from './usage.js';

await runService<BillingHandlers>({
  name: 'billing',
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  async prepare(runtime) {
    const { db, log, recordEvent, meshTokens } = runtime;
    const { dataKeys } = runtime.config;
    // BILLING_PRICING_FILE: the versioned prices and plans (default: pricing.json of the service).
    const pricing = Pricing.load(readString('BILLING_PRICING_FILE', fileURLToPath(new URL('../../pricing.json', import.meta.url))));
    const accounts = new Accounts({ db, pricing, freeCreditUsd: parsePlainDecimal(readString('FREE_CREDIT_USD', '1.00'), 'FREE_CREDIT_USD') });
    const keys = new KeyDirectory(createPeerClient(KeyService, { name: 'keys', url: serviceUrl('keys') }, meshTokens, { caller: 'billing' }));
    // PUBLIC_BASE_URL: where users reach the gateway (the sandbox checkout page is one of its routes).
    const publicUrl = readString('PUBLIC_BASE_URL', 'http://localhost:8080').replace(/\/+$/, '');
    const sandbox = new SandboxProvider({ dataKeys, publicUrl });
    // STRIPE_SECRET_KEY (with STRIPE_WEBHOOK_SECRET): new checkouts go to Stripe Checkout, else to the sandbox.
    const stripeSettings = readStripeSettings(publicUrl);
    const stripe = stripeSettings && new StripeProvider(stripeSettings, log);
    const provider = stripe ?? sandbox;
    log.info({ pricing_version: pricing.version, provider: provider.name }, 'billing prices loaded');
    const topups = new Topups({
      db,
      log,
      accounts,
      provider,
      sandbox,
      recordEvent,
      maxAmountUsd: parsePlainDecimal(readString('TOPUP_MAX_USD', '10000'), 'TOPUP_MAX_USD'),
      checkoutTtlMs: readDuration('CHECKOUT_TTL', '24h'),
    });
    return {
      pricing,
      usage: new UsageLedger({ db, pricing, accounts, keys, recordEvent }),
      reports: new Reports({ db, pricing, accounts }),
      topups,
      stripeWebhooks: new StripeWebhooks({ stripe, topups, log }),
    };
  },
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
});
