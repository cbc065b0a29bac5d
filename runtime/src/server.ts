import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { Code, ConnectError, createContextKey, type ConnectRouter, type HandlerContext, type Interceptor } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from './gen/grpc/health/v1/health_pb.js';
import { isDatabaseUnavailable } from './db.js';
import { apiError } from './errors.js';
import { newId } from './ids.js';
import type { Logger } from './log.js';
import { MeshTokenError, type MeshClaims, type MeshTokens } from './mesh-token.js';

const callerKey = createContextKey<MeshClaims | undefined>(undefined, { description: 'mesh caller' });
const requestIdKey = createContextKey<string>('', { description: 'request id' });

/** The verified mesh-token claims of the current call (always set past the interceptor). */
export function callerOf(ctx: HandlerContext): MeshClaims {
  const claims = ctx.values.get(callerKey);
  if (!claims) throw new ConnectError('no mesh token', Code.Unauthenticated);
  return claims;
}

/**
 * Response header through which a service tells the gateway which sessions a call just revoked
 * (comma-separated ids), so they are refused from the very next request on that gateway; other
 * gateway replicas learn them from the `session.revoked` event.
 */
export const revokedSessionsHeader = 'sb-revoked-sessions';

/** The client address the gateway saw for this call, if a gateway made it for a client. */
export function clientIpOf(ctx: HandlerContext): string | undefined {
  return ctx.values.get(callerKey)?.clientIp;
}

export function requestIdOf(ctx: HandlerContext): string {
  return ctx.values.get(requestIdKey);
}

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
}

export interface RpcServer {
  port: number;
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

  const authenticate: Interceptor = (next) => async (req) => {
    if (req.service.typeName === Health.typeName) return next(req);
    const requestId = req.header.get('x-request-id') || newId('req');
    req.contextValues.set(requestIdKey, requestId);
    const authorization = req.header.get('authorization') ?? '';
    if (!authorization.startsWith('Bearer ')) {
      throw new ConnectError('a mesh token is required (Authorization: Bearer <JWT>)', Code.Unauthenticated);
    }
    try {
      req.contextValues.set(callerKey, await meshTokens.verify(authorization.slice(7), name));
    } catch (err) {
      if (err instanceof MeshTokenError) throw new ConnectError(err.message, Code.Unauthenticated);
      throw err;
    }
    const started = performance.now();
    try {
      return await next(req);
    } catch (err) {
      throw translateError(err, log, requestId, req.method.name);
    } finally {
      log.debug({ request_id: requestId, rpc: req.method.name, ms: Math.round(performance.now() - started) }, 'rpc');
    }
  };

  const handler = connectNodeAdapter({
    grpc: true,
    grpcWeb: true,
    connect: true,
    interceptors: [authenticate],
    routes(router) {
      router.service(Health, {
        async check(req) {
          // "liveness" answers for the process alone, so a database outage does not restart pods.
          if (req.service === 'liveness') return { status: shuttingDown ? ServingStatus.NOT_SERVING : ServingStatus.SERVING };
          const healthy = !shuttingDown && (await options.isHealthy().catch(() => false));
          return { status: healthy ? ServingStatus.SERVING : ServingStatus.NOT_SERVING };
        },
        async *watch(_req, ctx) {
          const healthy = !shuttingDown && (await options.isHealthy().catch(() => false));
          yield { status: healthy ? ServingStatus.SERVING : ServingStatus.NOT_SERVING };
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
        },
      });
      options.routes(router);
    },
  });

  const h1 = http.createServer({ keepAliveTimeout: 65_000 }, handler);
  const h2 = http2.createServer({}, handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  h2.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });

  // One port for both protocols: an HTTP/2 client with prior knowledge opens with "PRI * HTTP/2.0".
  const server = net.createServer((socket) => {
    socket.once('data', (chunk) => {
      socket.pause();
      socket.unshift(chunk);
      const target = chunk.subarray(0, 3).toString('latin1') === 'PRI' ? h2 : h1;
      target.emit('connection', socket);
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
    async close(graceMs = 10_000) {
      shuttingDown = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      h1.closeIdleConnections();
      for (const session of sessions) session.close();
      const timer = setTimeout(() => {
        h1.closeAllConnections();
        for (const session of sessions) session.destroy();
      }, graceMs);
      await closed;
      clearTimeout(timer);
    },
  };
}

/** Expected errors pass through; outages become Unavailable; anything else is logged as a bug. */
function translateError(err: unknown, log: Logger, requestId: string, rpc: string): ConnectError {
  if (err instanceof ConnectError) return err;
  if (isDatabaseUnavailable(err)) {
    log.warn({ request_id: requestId, rpc, err: (err as Error).message }, 'database unavailable');
    return apiError(Code.Unavailable, 'service_unavailable', 'The database is unavailable; try again shortly.');
  }
  log.error({ request_id: requestId, rpc, err }, 'unhandled error');
  return new ConnectError('internal error', Code.Internal);
}
