import type { ConnectRouter } from '@connectrpc/connect';
import { ConversationService, FeedbackService, RoutingService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';

/**
 * The conversations RPCs. Their behaviour is a later issue: until it lands every method answers
 * `unimplemented` (501 on the REST surface) rather than a fake success.
 */
export function routes(router: ConnectRouter): void {
  router.service(ConversationService, {});
  router.service(FeedbackService, {});
  router.service(RoutingService, {});
}
