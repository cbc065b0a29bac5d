import http from 'node:http';
import { create } from '@bufbuild/protobuf';
import { type ServiceName, serviceNames } from '@switchboard/contracts/components';
import { Health, HealthCheckRequestSchema, HealthCheckResponse_ServingStatus as ServingStatus } from '@switchboard/contracts/grpc/health/v1/health_pb';
import { AuthService, OrganizationService } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { AuditPublisher } from '@switchboard/runtime/audit-publisher';
import { answerClientError } from '@switchboard/runtime/client-error';
import { createPeerClient, UnaryClient } from '@switchboard/runtime/clients';
import { createLogger } from '@switchboard/runtime/log';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { Metrics, startMetricsServer } from '@switchboard/runtime/metrics';
import { connectNats } from '@switchboard/runtime/nats';
import { closeHttpServer, stopGracefully } from '@switchboard/runtime/shutdown';
import { keepByteOrderMarks } from '@switchboard/runtime/text-encoding';
import { withTimeout } from '@switchboard/runtime/timing';
import { trustIncomingTraceContext } from '@switchboard/runtime/trace-context';
import { Authenticator } from './auth.js';
import { readGatewayConfig } from './config.js';
import { createDashboardHandler } from './dashboard.js';
import { createDataPlaneProxy, dataPlanePaths } from './data-plane-proxy.js';
import { handleDocs } from './docs.js';
import { IdempotencyStore, takeoverDelayOf } from './idempotency.js';
import { buildOpenApiDocument } from './openapi.js';
import { RateLimiter } from './rate-limits.js';
import { callTimeoutMs, createRestHandler, sendJson } from './rest.js';
import { RevokedSessions, startRevocationFeed } from './revocations.js';
import { Router } from './router.js';
import { buildRoutes } from './routes.js';

const log = createLogger('gateway');
keepByteOrderMarks();

async function main() {
  const config = readGatewayConfig();
  const { port, host, events, serviceUrls: urls, dataPlaneUrl, trustedProxies } = config;
  const meshTokens = new MeshTokens(config.meshKeys);
  const clients = Object.fromEntries(serviceNames.map((name) => [name, new UnaryClient(urls[name])])) as Record<ServiceName, UnaryClient>;
  const asGateway = { caller: 'gateway' };
  const identityAuth = createPeerClient(AuthService, { name: 'identity', url: urls.identity }, meshTokens, asGateway);
  const revokedSessions = new RevokedSessions();
  // While NATS refuses the gateway's credentials on either connection, the replica is unready (docs/operations.md#nats-credentials).
  const natsRefusedBy = new Set<string>();
  const natsAccess = (connection: string) => ({
    seed: events.natsSeed,
    onRefused: (refused: boolean) => void (refused ? natsRefusedBy.add(connection) : natsRefusedBy.delete(connection)),
  });
  const authenticator = new Authenticator(
    identityAuth,
    createPeerClient(OrganizationService, { name: 'identity', url: urls.identity }, meshTokens, asGateway),
    createPeerClient(KeyService, { name: 'keys', url: urls.keys }, meshTokens, asGateway),
    log,
    revokedSessions,
    config.keyCacheTtlMs,
  );
  const revocationFeed = await startRevocationFeed({
    revoked: revokedSessions,
    identity: identityAuth,
    natsUrl: events.natsUrl,
    natsAccess: natsAccess('revocations'),
    subjectPrefix: events.eventsSubjectPrefix,
    log,
    pollIntervalMs: config.revocationPollIntervalMs,
    onWorkspaceChanged: (workspaceId) => authenticator.forgetWorkspace(workspaceId),
    onKeyChanged: (keyId) => authenticator.forgetKey(keyId),
  });
  const dataPlane = createDataPlaneProxy(dataPlaneUrl, log, config.dataPlaneTimeoutMs);
  const routes = buildRoutes();
  const openApi = JSON.stringify(buildOpenApiDocument(routes));
  const dashboard = createDashboardHandler();

  /** From the first step of a shutdown: /readyz answers 503 while requests are still served. */
  let shuttingDown = false;
  /** From the listener's close: answers end their connection. */
  let draining = false;
  const readiness = async () => {
    const dataPlaneState = fetch(`${dataPlaneUrl}/readyz`, { signal: AbortSignal.timeout(1500) })
      .then((response) => (response.ok ? 'serving' : 'not_serving'))
      .catch(() => 'unreachable');
    const states = await Promise.all(
      serviceNames.map(async (name) => {
        try {
          // Over the same connection as the REST calls: readiness tests the path requests take.
          const { message } = await clients[name].call(Health.method.check, create(HealthCheckRequestSchema), {}, 1500);
          const status = message.status;
          return [name, status === ServingStatus.SERVING ? 'serving' : 'not_serving'] as const;
        } catch {
          return [name, 'unreachable'] as const;
        }
      }),
    );
    const all = [...states, ['data-plane', await dataPlaneState] as const];
    return { ready: all.every(([, state]) => state === 'serving'), services: Object.fromEntries(all) };
  };

  const metrics = new Metrics('gateway');
  // The gateway's own refusals go to the audit log straight over JetStream (it has no outbox): best
  // effort. The Idempotency-Key answers are kept there too (a POST with the header is a 503 until it is reached).
  const nats = connectNats(events.natsUrl, 'gateway', log, natsAccess('events'));
  nats.catch((err) => log.warn({ err: (err as Error).message }, 'NATS unavailable: the gateway audit records wait in memory'));
  const idempotency = new IdempotencyStore({
    nats,
    bucket: config.idempotencyBucket,
    secret: config.idempotencySecret,
    log,
    takeoverAfterMs: takeoverDelayOf(callTimeoutMs),
  });
  const rateLimiter = new RateLimiter(config.rateLimits);
  const auditPublisher = new AuditPublisher({ nats, subjectPrefix: events.eventsSubjectPrefix, producer: 'gateway', log, metrics });
  // The public edge: a client's own trace context is continued only through a proxy trusted here.
  trustIncomingTraceContext((req) => trustedProxies.has(req.socket.remoteAddress ?? ''));
  const handler = createRestHandler({
    router: new Router(routes),
    authenticator,
    clients,
    meshTokens,
    log,
    metrics,
    audit: auditPublisher,
    trustedProxies,
    rateLimiter,
    idempotency,
    async builtIn(req, res, pathname, requestId, clientIp) {
      if (dataPlanePaths.has(pathname)) {
        await dataPlane(req, res, pathname, requestId, clientIp);
        return true;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') return false;
      if (pathname === '/healthz') {
        sendJson(res, 200, { status: 'ok' });
        return true;
      }
      if (pathname === '/readyz') {
        if (shuttingDown) {
          sendJson(res, 503, { status: 'shutting_down' });
          return true;
        }
        if (natsRefusedBy.size > 0) {
          sendJson(res, 503, { status: 'nats_credentials_refused' });
          return true;
        }
        // The load balancer's probe: whether this replica takes requests. The services' state is
        // left out, since it is the same for every replica: one service down would otherwise unroute
        // every gateway at once, and with them the routes that do not need that service.
        if (new URL(req.url ?? '/', 'http://gateway').searchParams.get('scope') === 'self') {
          sendJson(res, 200, { status: 'ready' });
          return true;
        }
        const state = await readiness();
        sendJson(res, state.ready ? 200 : 503, { status: state.ready ? 'ready' : 'not_ready', services: state.services });
        return true;
      }
      if (pathname === '/v1/openapi.json') {
        res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'public, max-age=300' });
        res.end(openApi);
        return true;
      }
      return (await handleDocs(pathname, res)) || dashboard(pathname, res);
    },
  });

  const server = http.createServer({ keepAliveTimeout: 65_000, requestTimeout: 30_000, headersTimeout: 20_000 }, (req, res) => {
    // Draining: answered, and the client reconnects (to another replica) for its next request.
    if (draining) res.setHeader('Connection', 'close');
    return handler(req, res);
  });
  server.on('clientError', answerClientError);
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  log.info({ port, routes: routes.length }, 'gateway listening');
  // Metrics never share the public port: they are for the cluster's scraper only.
  const metricsServer = config.metricsPort > 0 ? await startMetricsServer({ metrics, port: config.metricsPort, host, log }) : undefined;

  stopGracefully(log, {
    unready: () => {
      shuttingDown = true;
    },
    drain: (drainTimeoutMs) => {
      draining = true;
      return closeHttpServer(server, drainTimeoutMs);
    },
    async release() {
      await revocationFeed.stop();
      await auditPublisher.stop();
      rateLimiter.stop();
      // A NATS never reached leaves the connection pending for ever: shutdown does not wait on it.
      await withTimeout(
        nats.then((nc) => nc.close()),
        2000,
        'closing the NATS connection',
      ).catch(() => undefined);
      await metricsServer?.close();
    },
  });
}

main().catch((err) => {
  log.fatal({ err }, 'gateway failed to start');
  process.exit(1);
});
