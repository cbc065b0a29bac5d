import type { ConnectRouter } from '@connectrpc/connect';
import { EventService, WebhookService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';

/**
 * The RPC surface of the webhooks service: validation and translation only; the work belongs in
 * domain modules that `main.ts` builds and passes here. Webhooks are built by a later issue: until
 * then the handlers are empty and every RPC answers Unimplemented (501 on the REST surface),
 * never a fake success; each call still passes its access rule first.
 */
export type WebhooksHandlers = Record<string, never>;

export function registerRoutes(router: ConnectRouter, _handlers: WebhooksHandlers): void {
  router.service(WebhookService, {});
  router.service(EventService, {});
}
