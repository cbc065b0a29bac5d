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
import { Reports } from './reports.js';
import { type BillingHandlers, registerRoutes } from './server.js';
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
    const sandbox = new SandboxProvider({ dataKeys, publicUrl: readString('PUBLIC_BASE_URL', 'http://localhost:8080').replace(/\/+$/, '') });
    log.info({ pricing_version: pricing.version, provider: sandbox.name }, 'billing prices loaded');
    return {
      usage: new UsageLedger({ db, pricing, accounts, keys, recordEvent }),
      reports: new Reports({ db, pricing, accounts }),
      topups: new Topups({
        db,
        log,
        accounts,
        provider: sandbox,
        sandbox,
        recordEvent,
        maxAmountUsd: parsePlainDecimal(readString('TOPUP_MAX_USD', '10000'), 'TOPUP_MAX_USD'),
        checkoutTtlMs: readDuration('CHECKOUT_TTL', '24h'),
      }),
    };
  },
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
});
