import { fileURLToPath } from 'node:url';
import { servicePorts } from '@switchboard/contracts/components';
import { startPeriodic } from '@switchboard/runtime/periodic';
import { runService } from '@switchboard/runtime/service';
import { readBillingConfig } from './config.js';
import { prepareBilling } from './prepare.js';
import { registerRoutes } from './server.js';

await runService({
  name: 'billing',
  defaultPort: servicePorts.billing,
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  async prepare(runtime) {
    const config = readBillingConfig();
    return { config, ...prepareBilling(runtime, config) };
  },
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
  background: (runtime, { config, leases }) => [
    startPeriodic({
      name: 'balance lease pruning',
      everyMs: config.housekeepingIntervalMs,
      log: runtime.log,
      async run() {
        const deleted = await leases.prune();
        if (deleted > 0) runtime.log.info({ deleted }, 'pruned expired balance leases');
      },
    }),
  ],
});
