import { fileURLToPath } from 'node:url';
import { servicePorts } from '@switchboard/contracts/components';
import { startPeriodic } from '@switchboard/runtime/periodic';
import { runService } from '@switchboard/runtime/service';
import { readWebhooksConfig } from './config.js';
import { endpointSecretPurpose } from './endpoints.js';
import { startEventConsumers } from './events.js';
import { prepareWebhooks } from './prepare.js';
import { registerRoutes } from './server.js';

await runService({
  name: 'webhooks',
  defaultPort: servicePorts.webhooks,
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  // Re-encrypted under the newest data key by `--rotate-data-key`.
  encryptedColumns: [
    { table: 'endpoints', keyColumn: 'id', column: 'secret_encrypted', purpose: endpointSecretPurpose },
    { table: 'endpoints', keyColumn: 'id', column: 'previous_secret_encrypted', purpose: endpointSecretPurpose },
  ],
  async prepare(runtime) {
    const config = readWebhooksConfig();
    return { config, ...prepareWebhooks(runtime, config) };
  },
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
  background: (runtime, { config, intake, dispatcher, retention }) => {
    const prune = startPeriodic({
      name: 'pruning idempotency keys',
      everyMs: config.housekeepingIntervalMs,
      log: runtime.log,
      run: () => intake.pruneIdempotencyKeys(),
    });
    const retain = startPeriodic({
      name: 'webhook retention',
      everyMs: config.housekeepingIntervalMs,
      log: runtime.log,
      run: async () => void (await retention.run()),
    });
    return [...startEventConsumers(runtime, intake), dispatcher.start(), prune, retain];
  },
});
