import { fileURLToPath } from 'node:url';
import { servicePorts } from '@switchboard/contracts/components';
import { runService } from '@switchboard/runtime/service';
import { readKeysConfig } from './config.js';
import { startEventConsumers } from './events.js';
import { startHousekeeping } from './housekeeping.js';
import { alertSecretPurpose } from './keys.js';
import { prepareKeys } from './prepare.js';
import { Revocations } from './revocations.js';
import { registerRoutes } from './server.js';
import { Spend } from './spend.js';
import { registerSpendLimitRoutes } from './spend-limit-routes.js';

await runService({
  name: 'keys',
  defaultPort: servicePorts.keys,
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  // Re-encrypted under the newest data key by `--rotate-data-key`.
  encryptedColumns: [{ table: 'api_keys', keyColumn: 'id', column: 'alert_signing_secret_encrypted', purpose: alertSecretPurpose }],
  async prepare(runtime) {
    const config = readKeysConfig();
    return { config, ...prepareKeys(runtime, config) };
  },
  routes: (router, _runtime, handlers) => [registerRoutes(router, handlers), registerSpendLimitRoutes(router, handlers.budgets)],
  background: (runtime, { config, states, notifier }) => [
    ...startEventConsumers(runtime, {
      spend: new Spend({ log: runtime.log, recordEvent: runtime.recordEvent, notifier }),
      revocations: new Revocations({ log: runtime.log, recordEvent: runtime.recordEvent, notifier }),
    }),
    startHousekeeping({ db: runtime.db, log: runtime.log, recordEvent: runtime.recordEvent, intervalMs: config.housekeepingIntervalMs }),
    { stop: () => states.stop() },
  ],
});
