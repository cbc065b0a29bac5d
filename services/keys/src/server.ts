import type { ConnectRouter } from '@connectrpc/connect';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';

/**
 * The RPC surface of the keys service: validation and translation only; the work belongs in
 * domain modules that `main.ts` builds and passes here. API keys are built by a later issue: until
 * then the handlers are empty and every RPC answers Unimplemented (501 on the REST surface),
 * never a fake success; each call still passes its access rule first.
 */
export type KeysHandlers = Record<string, never>;

export function registerRoutes(router: ConnectRouter, _handlers: KeysHandlers): void {
  router.service(KeyService, {});
}
