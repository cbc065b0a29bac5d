import { fileURLToPath } from 'node:url';
import { fromBinary } from '@bufbuild/protobuf';
import { servicePorts } from '@switchboard/contracts/components';
import { workDurable } from '@switchboard/contracts/nats-permissions';
import { ExchangeRecordSchema } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { UsageRecordedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { consumeEvents, onEventBatch } from '@switchboard/runtime/consumer';
import { workSubjects } from '@switchboard/runtime/nats';
import { runService } from '@switchboard/runtime/service';
import { consumeWork } from '@switchboard/runtime/work-consumer';
import { readConversationsConfig } from './config.js';
import { appendExchanges } from './exchange-appends.js';
import { prepareConversations } from './prepare.js';
import { registerRoutes } from './server.js';

await runService({
  name: 'conversations',
  defaultPort: servicePorts.conversations,
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  prepare: async (runtime) => prepareConversations(runtime, readConversationsConfig()),
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
  background: (runtime, { generations }) => [
    // Busy (one event per model request): a batch per transaction.
    ...consumeEvents(runtime, [
      onEventBatch(UsageRecordedSchema, (events, trx) =>
        generations.usageRecorded(
          trx,
          events.map((event) => event.data),
        ),
      ),
    ]),
    // The data planes' conversation exchanges (docs/money-path.md#conversation-appends), a transaction per batch.
    consumeWork(runtime, {
      durable: workDurable('conversations', 'exchanges'),
      subject: workSubjects(runtime.config.workSubjectPrefix).exchanges,
      decode: (msg) => fromBinary(ExchangeRecordSchema, msg.data),
      async handle(records, trx) {
        const outcome = await appendExchanges(trx, records, runtime.log);
        runtime.log.debug({ ...outcome, records: records.length }, 'conversation exchanges applied');
      },
    }),
  ],
});
