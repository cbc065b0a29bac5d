import { fileURLToPath } from 'node:url';
import { servicePorts } from '@switchboard/contracts/components';
import { startConsumer } from '@switchboard/runtime/consumer';
import { runService } from '@switchboard/runtime/service';
import { readConversationsConfig } from './config.js';
import { prepareConversations } from './prepare.js';
import { registerRoutes } from './server.js';

await runService({
  name: 'conversations',
  defaultPort: servicePorts.conversations,
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  prepare: async (runtime) => prepareConversations(runtime, readConversationsConfig()),
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
  background: (runtime, { generations }) => [
    startConsumer({
      db: runtime.db,
      nats: runtime.nats,
      stream: runtime.config.eventsStream,
      durable: 'conversations-billing-usage-recorded',
      filterSubjects: [`${runtime.config.eventsSubjectPrefix}.billing.usage.recorded`],
      log: runtime.log,
      metrics: runtime.metrics,
      handle: (event, trx) => generations.usageRecorded(trx, event.data),
      concurrency: 4,
    }),
  ],
});
