import { fileURLToPath } from 'node:url';
import { servicePorts } from '@switchboard/contracts/components';
import { runService } from '@switchboard/runtime/service';
import { readBillingConfig } from './config.js';
import { prepareBilling } from './prepare.js';
import { registerRoutes } from './server.js';

await runService({
  name: 'billing',
  defaultPort: servicePorts.billing,
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  prepare: async (runtime) => prepareBilling(runtime, readBillingConfig()),
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
});
