import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { Sampler } from '@switchboard/runtime/routing-sampler';
import type { ServiceRuntime } from '@switchboard/runtime/service';
import type { ConversationsConfig } from './config.js';
import { Conversations } from './conversations.js';
import { FeedbackLedger } from './feedback.js';
import { GenerationDirectory } from './generation-directory.js';
import { Router } from './routing.js';
import type { ConversationsHandlers } from './server.js';

/** What the conversations handlers are built from: the parts of the service runtime they use. */
export type ConversationsRuntime = Pick<ServiceRuntime, 'db' | 'log' | 'recordEvent' | 'meshTokens' | 'audit'>;

/** The domain modules behind the conversations handlers, as main.ts (and the in-process test) builds them. */
export function prepareConversations(runtime: ConversationsRuntime, config: ConversationsConfig): ConversationsHandlers & { generations: GenerationDirectory } {
  const { db, log, recordEvent, meshTokens } = runtime;
  // SWITCHBOARD_MODELS_FILE: the model catalog (a malformed one stops the start, naming the entry).
  const catalog = ModelCatalog.load();
  const router = new Router({ db, catalog, sampler: new Sampler(config.routingSeed) });
  const generations = new GenerationDirectory({
    db,
    billing: createPeerClient(UsageService, { name: 'billing', url: config.billingUrl }, meshTokens, { caller: 'conversations' }),
  });
  log.info({ models: catalog.models.length, fast: catalog.candidates('fast').length, balanced: catalog.candidates('balanced').length }, 'model catalog loaded');
  return {
    conversations: new Conversations({ db, audit: runtime.audit }),
    feedback: new FeedbackLedger({ db, generations, router, recordEvent, audit: runtime.audit }),
    router,
    db,
    generations,
  };
}
