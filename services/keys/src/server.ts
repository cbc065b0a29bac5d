import type { ConnectRouter } from '@connectrpc/connect';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';

/**
 * The keys RPCs. Their behaviour is a later issue: until it lands every method answers
 * `unimplemented` (501 on the REST surface) rather than a fake success.
 */
export function routes(router: ConnectRouter): void {
  router.service(KeyService, {});
}
