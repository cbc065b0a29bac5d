import { fileURLToPath } from 'node:url';
import { runService } from '@switchboard/runtime/service';
import { type KeysHandlers, registerRoutes } from './server.js';

await runService<KeysHandlers>({
  name: 'keys',
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  prepare: async () => ({}),
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
});
