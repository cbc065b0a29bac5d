import { fileURLToPath } from 'node:url';
import { runService } from '@switchboard/runtime/service';
import { registerRoutes, type WebhooksHandlers } from './server.js';

await runService<WebhooksHandlers>({
  name: 'webhooks',
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  prepare: async () => ({}),
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
});
