import type { DescService } from '@bufbuild/protobuf';
import { type Client, Code, ConnectError, type ConnectRouter, createClient, createRouterTransport, type Interceptor } from '@connectrpc/connect';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { callerKey, requestIdKey } from './call-context.js';
import { newId } from './ids.js';
import { type MeshClaims, MeshTokenError, type MeshTokens } from './mesh-token.js';
import { guardRpc, ruleOf } from './policy.js';

export interface InProcessOptions {
  /** The service name: the audience of its mesh tokens. */
  name: string;
  meshTokens: MeshTokens;
  /** The service's `registerRoutes`, with the handlers main.ts builds. */
  routes: (router: ConnectRouter) => void;
}

/**
 * Clients of a service's handlers served in this process (createRouterTransport), with what
 * startRpcServer puts around every call: the mesh token verified into the caller's claims, the
 * request id, and the RPC's access rule from its proto (policy.ts). For handler tests: the
 * handlers' mapping of input, visibility and permissions, without a port or another process.
 * The returned function makes a client that calls as the component and principal `claims` name.
 */
export function inProcessClients(options: InProcessOptions): <S extends DescService>(service: S, claims: MeshClaims) => Client<S> {
  const { name, meshTokens } = options;
  const guard: Interceptor = (next) => async (req) => {
    const authorization = req.header.get('authorization') ?? '';
    try {
      req.contextValues.set(callerKey, await meshTokens.verify(authorization.replace(/^Bearer /, ''), name));
    } catch (err) {
      if (err instanceof MeshTokenError) throw new ConnectError(err.message, Code.Unauthenticated);
      throw err;
    }
    req.contextValues.set(requestIdKey, req.header.get('x-request-id') || newId('req'));
    return guardRpc(ruleOf(req.method), req.method, req.contextValues, () => next(req));
  };
  return (service, claims) => {
    const sign: Interceptor = (next) => async (req) => {
      req.header.set('authorization', `Bearer ${await meshTokens.mint(name, claims)}`);
      return next(req);
    };
    return createClient(service, createRouterTransport(options.routes, { router: { interceptors: [guard] }, transport: { interceptors: [sign] } }));
  };
}

/** How a call was refused: its Connect code and the public error code and field it names. */
export interface Refusal {
  code: Code;
  error: string;
  field: string;
}

/** The refusal of `call` (throws when it succeeds or fails with something other than a ConnectError). */
export async function refusalOf(call: Promise<unknown>): Promise<Refusal> {
  try {
    await call;
  } catch (err) {
    if (!(err instanceof ConnectError)) throw err;
    const detail = err.findDetails(ErrorDetailSchema)[0];
    return { code: err.code, error: detail?.code ?? '', field: detail?.field ?? '' };
  }
  throw new Error('expected the call to be refused, but it succeeded');
}
