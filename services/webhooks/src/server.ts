import type { ConnectRouter } from '@connectrpc/connect';
import { EventService, WebhookService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';

/**
 * The webhooks RPCs. Their behaviour is a later issue: until it lands every method answers
 * `unimplemented` (501 on the REST surface) rather than a fake success.
 */
export function routes(router: ConnectRouter): void {
  router.service(WebhookService, {});
  router.service(EventService, {});
}
