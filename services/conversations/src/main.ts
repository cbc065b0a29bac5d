import { fileURLToPath } from 'node:url';
import { runService } from '@switchboard/runtime/service';
import { type ConversationsHandlers, registerRoutes } from './server.js';

await runService<ConversationsHandlers>({
  name: 'conversations',
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  prepare: async () => ({}),
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
});
