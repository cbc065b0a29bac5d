import { fileURLToPath } from 'node:url';
import { servicePorts } from '@switchboard/contracts/components';
import { UsageRecordedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { consumeEvents, onEvent } from '@switchboard/runtime/consumer';
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
  background: (runtime, { generations }) =>
    consumeEvents(runtime, [onEvent(UsageRecordedSchema, (event, trx) => generations.usageRecorded(trx, event.data), { concurrency: 4 })]),
});
