import type http from 'node:http';
import { createLogger } from '@switchboard/runtime/log';
import { Metrics } from '@switchboard/runtime/metrics';
import { Authenticator } from '../src/auth.js';
import { createRestHandler, type RestOptions } from '../src/rest.js';
import { router } from './routes-fixture.js';

/**
 * The gateway's REST handler with no service behind it, for the answers it gives before any
 * service would be asked (refusals of input, credentials, routes, rate limits, its built-ins).
 */
export function servicelessGateway(options: Partial<Pick<RestOptions, 'builtIn' | 'rateLimiter'>> = {}): http.RequestListener {
  const unreachable = undefined as never;
  return createRestHandler({
    router,
    // Only the Authorization header is read before a service would be asked.
    authenticator: new Authenticator(unreachable, unreachable, unreachable, createLogger('gateway', 'silent')),
    clients: unreachable,
    meshTokens: unreachable,
    log: createLogger('gateway', 'silent'),
    metrics: new Metrics('gateway'),
    builtIn: async () => false,
    ...options,
  });
}
