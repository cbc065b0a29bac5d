import { fileURLToPath } from 'node:url';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { UsageRecordedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { serviceUrl } from '@switchboard/runtime/config';
import { consumeEvents, onEvent } from '@switchboard/runtime/consumer';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { runService } from '@switchboard/runtime/service';
import { Conversations } from './conversations.js';
import { FeedbackLedger } from './feedback.js';
import { GenerationDirectory } from './generation-directory.js';
import { Router } from './routing.js';
import { Sampler } from './sampler.js';
import { type ConversationsHandlers, registerRoutes } from './server.js';

await runService<ConversationsHandlers & { generations: GenerationDirectory }>({
  name: 'conversations',
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  async prepare(runtime) {
    const { db, log, recordEvent, meshTokens } = runtime;
    // SWITCHBOARD_MODELS_FILE: the model catalog (a malformed one stops the start, naming the entry).
    const catalog = ModelCatalog.load();
    // ROUTING_SEED: a fixed seed for the routing sampler (tests); random otherwise.
    const seed = process.env.ROUTING_SEED ? Number(process.env.ROUTING_SEED) : undefined;
    const router = new Router({ db, catalog, sampler: new Sampler(seed) });
    const generations = new GenerationDirectory({
      db,
      billing: createPeerClient(UsageService, { name: 'billing', url: serviceUrl('billing') }, meshTokens, { caller: 'conversations' }),
    });
    log.info(
      { models: catalog.models.length, fast: catalog.candidates('fast').length, balanced: catalog.candidates('balanced').length },
      'model catalog loaded',
    );
    return {
      conversations: new Conversations({ db }),
      feedback: new FeedbackLedger({ db, generations, router, recordEvent }),
      router,
      generations,
    };
  },
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
  background: (runtime, { generations }) =>
    consumeEvents(runtime, [onEvent(UsageRecordedSchema, (event, trx) => generations.usageRecorded(trx, event.data), { concurrency: 4 })]),
});
