import http from 'node:http';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { ExchangeService, RoutingService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { createLogger } from '@switchboard/runtime/log';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { Metrics, startMetricsServer } from '@switchboard/runtime/metrics';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { Pricing } from '@switchboard/runtime/pricing';
import { closeHttpServer, stopGracefully } from '@switchboard/runtime/shutdown';
import { Completions } from './completions.js';
import { readDataPlaneConfig } from './config.js';
import { Prices } from './prices.js';
import { createHandler } from './server.js';

/**
 * The reference data plane (docs/api/front-door.md): stateless, everything it knows comes over the mesh and
 * from the model catalog and the pricing file. `PORT` (default 8081); the gateway forwards `/v1/chat/completions` and
 * `/v1/models` to it (`DATA_PLANE_URL`).
 */
const log = createLogger('data-plane');

try {
  const catalog = ModelCatalog.load();
  const config = readDataPlaneConfig(catalog);
  const meshTokens = new MeshTokens(config.meshSecret, Date.now, config.meshSecretPrevious);
  const claims = { caller: 'data-plane' };
  const peer = <T extends Parameters<typeof createPeerClient>[0]>(service: T, name: 'keys' | 'billing' | 'conversations') =>
    createPeerClient(service, { name, url: config.urls[name] }, meshTokens, claims);
  const usage = peer(UsageService, 'billing');
  const completions = new Completions({
    log,
    catalog,
    prices: new Prices(Pricing.load(config.pricingFile)),
    keys: peer(KeyService, 'keys'),
    routing: peer(RoutingService, 'conversations'),
    usage,
    exchanges: peer(ExchangeService, 'conversations'),
    settings: {
      headersTimeoutMs: config.headersTimeoutMs,
      idleTimeoutMs: config.idleTimeoutMs,
      defaultMaxTokens: config.defaultMaxTokens,
      upstreamApiKeys: config.upstreamApiKeys,
    },
  });
  const { port, host, metricsPort } = config;
  const metrics = new Metrics('data-plane');
  const lifecycle = { ready: true, draining: false };
  const server = http.createServer(
    { keepAliveTimeout: 65_000, headersTimeout: 20_000, requestTimeout: 30_000 },
    createHandler({ log, catalog, completions, metrics, lifecycle }),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  log.info({ port, models: catalog.models.length }, 'data plane listening');
  const metricsServer = metricsPort > 0 ? await startMetricsServer({ metrics, port: metricsPort, host, log }) : undefined;
  stopGracefully(log, {
    unready: () => {
      lifecycle.ready = false;
    },
    async drain(drainTimeoutMs) {
      lifecycle.draining = true;
      await closeHttpServer(server, drainTimeoutMs);
      // Streams still running past the drain timeout were cut: they are billed for what they
      // produced, and every usage record still being retried is waited for (bounded by the
      // shutdown's overall budget).
      await completions.drain();
    },
    async release() {
      await metricsServer?.close();
    },
  });
} catch (err) {
  log.fatal({ err: (err as Error).message }, 'the data plane could not start');
  process.exit(1);
}
