import type { ConnectRouter } from '@connectrpc/connect';
import { ConversationService, FeedbackService, RoutingService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';

/**
 * The RPC surface of the conversations service: validation and translation only; the work belongs in
 * domain modules that `main.ts` builds and passes here. Conversations, feedback and routing are built by a later issue: until
 * then the handlers are empty and every RPC answers Unimplemented (501 on the REST surface),
 * never a fake success; each call still passes its access rule first.
 */
export type ConversationsHandlers = Record<string, never>;

export function registerRoutes(router: ConnectRouter, _handlers: ConversationsHandlers): void {
  router.service(ConversationService, {});
  router.service(FeedbackService, {});
  router.service(RoutingService, {});
}
