import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import type { DescMethod } from '@bufbuild/protobuf';
import { Code, ConnectError, type ConnectRouter, type ContextValues, type Interceptor } from '@connectrpc/connect';
import { codeToString } from '@connectrpc/connect/protocol-connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from '@switchboard/contracts/grpc/health/v1/health_pb';
import { audit } from './audit.js';
import { callerKey, requestIdKey } from './call-context.js';
import { isDatabaseInputError, isDatabaseUnavailable } from './db.js';
import { errorCatalogue } from './error-catalogue.js';
import { apiError } from './errors.js';
import { FastUnaryHandler, maxRequestBytes } from './fast-unary.js';
import { newId } from './ids.js';
import { checkingInput } from './input-rules.js';
import type { Logger } from './log.js';
import { claimedCaller, MeshTokenError, type MeshTokens } from './mesh-token.js';
import type { Metrics } from './metrics.js';
import { guardRpc, type RpcRule, readRpcRules, rpcName } from './policy.js';
import { inSpan, tracingOn } from './trace-context.js';
import { replaceBodyWithEmptyMessage } from './unread-body.js';

export { type CallScope, callerOf, callScopeOf, clientIpOf, requestIdOf, userAgentOf } from './call-context.js';

const firstByteTimeoutMs = 10_000;
const healthPrefix = `/${Health.typeName}/`;
/** A connection with nothing in flight for this long is closed. */
const idleConnectionMs = 120_000;

/**
 * Response header through which a service tells the gateway which sessions a call just revoked
 * (comma-separated ids), so they are refused from the very next request on that gateway; other
 * gateway replicas learn them from the `session.revoked` event.
 */
export const revokedSessionsHeader = 'sb-revoked-sessions';

/**
 * Response header through which identity tells the gateway that memberships or roles of an
 * organization changed (its id), so cached roles for it are dropped before the next request;
 * other gateway replicas learn it from the organization.* events.
 */
export const changedWorkspaceHeader = 'sb-changed-workspace';

/**
 * Response header through which a service tells the gateway that an API key's standing changed
 * (its id: revoked, cap changed), so the gateway's cached answer for it is dropped before the next
 * request; other gateway replicas learn it from the key.revoked and key.updated events.
 */
export const changedKeyHeader = 'sb-changed-key';

/** Response header through which a service answers with another 2xx than its route's (200 for a replaced resource). */
export const statusOverrideHeader = 'sb-http-status';

/**
 * Response header through which a service gives the Content-Security-Policy of a page it renders
 * (an RPC answering google.api.HttpBody, e.g. a policy with the nonce of the page's inline
 * script). The gateway uses it in place of its deny-all policy on HttpBody routes only, and only
 * when it still starts from `default-src 'none'` and forbids framing; JSON answers always keep
 * the deny-all policy, and no other service header ever reaches the client.
 */
export const contentSecurityPolicyHeader = 'sb-content-security-policy';

export interface RpcServerOptions {
  /** The service name: the audience its mesh tokens must carry. */
  name: string;
  port: number;
  host?: string;
  routes: (router: ConnectRouter) => void;
  meshTokens: MeshTokens;
  log: Logger;
  /** Readiness of the service's own dependencies (its database). */
  isHealthy: () => Promise<boolean>;
  /** Where each call's latency and outcome are counted. */
  metrics: Metrics;
}

export interface RpcServer {
  port: number;
  /** Health answers NOT_SERVING from now on (the first step of a shutdown); calls are still served. */
  unready(): void;
  /** Stops accepting calls, lets in-flight calls finish (up to `graceMs`), then closes. */
  close(graceMs?: number): Promise<void>;
}

/**
 * Serves Connect, gRPC and gRPC-Web on one port, over HTTP/1.1 and cleartext HTTP/2 (h2c), with
 * the standard grpc.health.v1.Health service. Every other call must carry a mesh token.
 */
export async function startRpcServer(options: RpcServerOptions): Promise<RpcServer> {
  const { name, meshTokens, log } = options;
  let shuttingDown = false;
  /** Off from the first step of a shutdown: the process still serves, but asks not to be sent more. */
  let ready = true;
  const rpcDuration = options.metrics.histogram('rpc_server_duration_seconds', 'RPCs served, by method and outcome (a Connect code, or ok).', ['rpc', 'code']);
  /** The access rule of every registered RPC, by name; filled before the server listens. */
  let rules = new Map<string, RpcRule>();

  /** Every call but health: verify the mesh token, then run it with errors translated, in a span when tracing. */
  const guard = <T>(header: Headers, values: ContextValues, method: DescMethod, run: () => Promise<T>): Promise<T> => {
    const requestId = header.get('x-request-id') || newId('req');
    values.set(requestIdKey, requestId);
    if (!tracingOn()) return guardCall(header, values, method, requestId, run);
    const span = {
      name: `${method.parent.typeName}/${method.name}`,
      kind: 'server' as const,
      carrier: header,
      attributes: { 'rpc.system': 'connect_rpc', 'rpc.service': method.parent.typeName, 'rpc.method': method.name, 'switchboard.request_id': requestId },
    };
    return inSpan(
      span,
      () => guardCall(header, values, method, requestId, run),
      (err) => codeToString(ConnectError.from(err).code),
    );
  };
  const guardCall = async <T>(header: Headers, values: ContextValues, method: DescMethod, requestId: string, run: () => Promise<T>): Promise<T> => {
    const rpc = method.name;
    await verifyMeshCaller(meshTokens, name, header, values, log);
    const started = performance.now();
    let code = 'ok';
    try {
      // Every RPC's rule comes from its proto (policy.ts), applied here or by its handler.
      return await guardRpc(rules.get(rpcName(method)), method, values, run);
    } catch (err) {
      const translated = translateError(err, log, requestId, rpc);
      code = Code[translated.code] ?? 'unknown';
      throw translated;
    } finally {
      const seconds = (performance.now() - started) / 1000;
      rpcDuration.observe({ rpc: `${method.parent.name}/${rpc}`, code }, seconds);
      if (log.isLevelEnabled('debug')) log.debug({ request_id: requestId, rpc, ms: Math.round(seconds * 1000) }, 'rpc');
    }
  };
  const authenticate: Interceptor = (next) => (req) =>
    req.service.typeName === Health.typeName ? next(req) : guard(req.header, req.contextValues, req.method, () => next(req));
  const fastUnary = new FastUnaryHandler(guard);

  /**
   * Whether the call may have its body read: health checks, or a valid mesh token (verified
   * again, from the cache, by the guard). Anything else gets an empty message in place of its
   * body, so the guard refuses it without the server buffering or inflating a byte.
   */
  const admit = (req: http.IncomingMessage | http2.Http2ServerRequest): boolean | Promise<boolean> => {
    if (req.url?.startsWith(healthPrefix)) return true;
    const authorization = req.headers.authorization;
    if (typeof authorization !== 'string' || !authorization.startsWith('Bearer ')) {
      replaceBodyWithEmptyMessage(req);
      return false;
    }
    const token = authorization.slice(7);
    // The common case, a token seen before, costs no promise.
    if (meshTokens.verifiedBefore(token, name)) return true;
    return meshTokens.verify(token, name).then(
      () => true,
      () => {
        replaceBodyWithEmptyMessage(req);
        return false;
      },
    );
  };

  const handler = connectNodeAdapter({
    grpc: true,
    grpcWeb: true,
    connect: true,
    // Decompressed size counts too: connect inflates at most this much (a gzip bomb is a
    // resource_exhausted error, not an OOM).
    readMaxBytes: maxRequestBytes,
    interceptors: [authenticate],
    routes(router) {
      router.service(Health, {
        async check(req) {
          // "liveness" answers for the process alone, so a database outage does not restart pods.
          if (req.service === 'liveness') return { status: shuttingDown ? ServingStatus.NOT_SERVING : ServingStatus.SERVING };
          const healthy = ready && !shuttingDown && (await options.isHealthy().catch(() => false));
          return { status: healthy ? ServingStatus.SERVING : ServingStatus.NOT_SERVING };
        },
        async *watch(_req, ctx) {
          const healthy = ready && !shuttingDown && (await options.isHealthy().catch(() => false));
          yield { status: healthy ? ServingStatus.SERVING : ServingStatus.NOT_SERVING };
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
        },
      });
      // Input rules (docs/conventions.md#input-rules) are checked inside each implementation, so
      // after the access rule on both paths; a method they cannot place stops the start-up here.
      options.routes(checkingInput(fastUnary.recording(router)));
      // Fails closed: a registered RPC without a valid rule stops the start-up here.
      rules = readRpcRules(router.handlers.map((h) => h.method).filter((method) => method.parent.typeName !== Health.typeName));
    },
  });

  // HTTP/1.1 sockets and their calls in flight, tracked here: the h1 server never listens
  // itself (sockets are handed to it), so Node's own connection tracking does not apply.
  const h1Sockets = new Map<net.Socket, number>();
  const h1 = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    const socket = req.socket;
    h1Sockets.set(socket, (h1Sockets.get(socket) ?? 0) + 1);
    res.once('close', () => {
      const inFlight = (h1Sockets.get(socket) ?? 1) - 1;
      h1Sockets.set(socket, inFlight);
      if (shuttingDown && inFlight === 0) socket.destroy();
    });
    if (shuttingDown) res.setHeader('connection', 'close');
    void Promise.resolve(admit(req)).then(() => handler(req, res));
  });
  const h2 = http2.createServer({}, (req, res) => {
    const serve = (admitted: boolean) => {
      if (!admitted || !fastUnary.handle(req, res)) void handler(req, res);
    };
    const admitted = admit(req);
    if (typeof admitted === 'boolean') serve(admitted);
    else void admitted.then(serve);
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  h2.on('session', (session) => {
    sessions.add(session);
    session.setTimeout(idleConnectionMs, () => session.close());
    session.once('close', () => sessions.delete(session));
  });

  // One port for both protocols: an HTTP/2 client with prior knowledge opens with "PRI * HTTP/2.0".
  const waitingForFirstByte = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    waitingForFirstByte.add(socket);
    // A client that connects and says nothing does not keep a socket for ever.
    socket.setTimeout(firstByteTimeoutMs, () => socket.destroy());
    socket.once('close', () => {
      waitingForFirstByte.delete(socket);
      h1Sockets.delete(socket);
    });
    socket.once('data', (chunk) => {
      waitingForFirstByte.delete(socket);
      socket.setTimeout(0);
      socket.pause();
      socket.unshift(chunk);
      const isHttp2 = chunk.subarray(0, 3).toString('latin1') === 'PRI';
      if (!isHttp2) {
        h1Sockets.set(socket, 0);
        // Node's own HTTP/1.1 timeouts need a listening server; idle sockets end here instead.
        socket.setTimeout(idleConnectionMs, () => {
          if ((h1Sockets.get(socket) ?? 0) === 0) socket.destroy();
        });
      }
      (isHttp2 ? h2 : h1).emit('connection', socket);
      process.nextTick(() => socket.resume());
    });
    socket.on('error', () => socket.destroy());
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  log.info({ port }, `${name} listening (Connect, gRPC, gRPC-Web; HTTP/1.1 and h2c)`);

  return {
    port,
    unready() {
      ready = false;
    },
    async close(graceMs = 10_000) {
      shuttingDown = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of waitingForFirstByte) socket.destroy();
      for (const [socket, inFlight] of h1Sockets) if (inFlight === 0) socket.destroy();
      for (const session of sessions) session.close();
      const timer = setTimeout(() => {
        for (const socket of h1Sockets.keys()) socket.destroy();
        for (const session of sessions) session.destroy();
      }, graceMs);
      await closed;
      clearTimeout(timer);
    },
  };
}

/**
 * The caller of an RPC to service `audience`, from its mesh token (docs/api/internal-calls.md#mesh-tokens),
 * put in the call's context; Unauthenticated without a valid one, with an audit line (a forged or
 * misused token is a security event: ASVS 16.3). The RPC server and the in-process handler tests
 * (in-process.ts) both check callers here.
 */
export async function verifyMeshCaller(meshTokens: MeshTokens, audience: string, header: Headers, values: ContextValues, log?: Logger): Promise<void> {
  const authorization = header.get('authorization') ?? '';
  if (!authorization.startsWith('Bearer ')) {
    throw new ConnectError('a mesh token is required (Authorization: Bearer <JWT>)', Code.Unauthenticated);
  }
  const token = authorization.slice(7);
  try {
    values.set(callerKey, meshTokens.verifiedBefore(token, audience) ?? (await meshTokens.verify(token, audience)));
  } catch (err) {
    if (!(err instanceof MeshTokenError)) throw err;
    if (log)
      audit(log, {
        event: 'mesh_token',
        outcome: 'denied',
        requestId: values.get(requestIdKey),
        reason: err.message,
        // What the token claims, unverified: who to look at, never proof.
        details: { claimed_caller: claimedCaller(token).slice(0, 64), audience },
      });
    throw new ConnectError(err.message, Code.Unauthenticated);
  }
}

/** Expected errors pass through; outages become Unavailable; anything else is logged as a bug. */
export function translateError(err: unknown, log: Logger, requestId: string, rpc: string): ConnectError {
  if (err instanceof ConnectError) return err;
  if (isDatabaseInputError(err)) {
    log.warn({ request_id: requestId, rpc, err: (err as Error).message }, 'input the database refused');
    return apiError(Code.InvalidArgument, 'invalid_request', 'The request contains a value that cannot be stored (a NUL character, or a value too large).');
  }
  if (isDatabaseUnavailable(err)) {
    log.warn({ request_id: requestId, rpc, err: (err as Error).message }, 'database unavailable');
    const { serviceUnavailable } = errorCatalogue;
    return apiError(Code.Unavailable, serviceUnavailable.code, serviceUnavailable.message({ dependency: 'database' }));
  }
  log.error({ request_id: requestId, rpc, err }, 'unhandled error');
  return new ConnectError('internal error', Code.Internal);
}
