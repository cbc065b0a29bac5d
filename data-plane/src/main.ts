import http from 'node:http';
import { hostname } from 'node:os';
import { jetstream } from '@nats-io/jetstream';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { ExchangeService, RoutingService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { newId } from '@switchboard/runtime/ids';
import { createLogger, errorMessage } from '@switchboard/runtime/log';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { Metrics, startMetricsServer } from '@switchboard/runtime/metrics';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { connectNats, ensureWorkStream, workSubjects } from '@switchboard/runtime/nats';
import { Pricing } from '@switchboard/runtime/pricing';
import { closeHttpServer, stopGracefully } from '@switchboard/runtime/shutdown';
import { BudgetLeases } from './budget-leases.js';
import { Completions } from './completions.js';
import { readDataPlaneConfig } from './config.js';
import { ConversationDirectory } from './conversation-directory.js';
import { KeyReplica, sameRateLimits, sameSpendLimits } from './key-replica.js';
import { balanceOwner, capOwner, rateOwner } from './lease-owners.js';
import { Prices } from './prices.js';
import { RateLimiter, rateLeases } from './rate-limits.js';
import { RoutingReplica } from './routing-replica.js';
import { answerFrontDoorClientError, createHandler } from './server.js';
import { WorkPublisher } from './work-publisher.js';

/**
 * The reference data plane (docs/api/front-door.md, docs/money-path.md): it answers from
 * replicas in memory (key states, routing scores, prices) and leases on caps and balances, and
 * puts usage on JetStream; its peers are called in the background, never per request. `PORT`
 * (default 8081); the gateway forwards `/v1/chat/completions` and `/v1/models` to it
 * (`DATA_PLANE_URL`).
 */
const log = createLogger('data-plane');

try {
  const catalog = ModelCatalog.load();
  const config = readDataPlaneConfig(catalog);
  const meshTokens = new MeshTokens(config.meshKeys);
  const claims = { caller: 'data-plane' };
  const peer = <T extends Parameters<typeof createPeerClient>[0]>(service: T, name: 'keys' | 'billing' | 'conversations') =>
    createPeerClient(service, { name, url: config.urls[name] }, meshTokens, claims);
  const keysClient = peer(KeyService, 'keys');
  const billingClient = peer(UsageService, 'billing');
  const holder = `${hostname()}/${process.pid}/${newId('dp')}`;
  const metrics = new Metrics('data-plane');

  // Started without waiting: with NATS down the data plane still serves, its usage queued (docs/money-path.md#usage).
  // Refused NATS credentials make it unready (docs/operations.md#nats-credentials): its usage could not be settled.
  const nats = { refused: false };
  const natsReady = connectNats(config.events.natsUrl, 'data-plane', log, {
    seed: config.events.natsSeed,
    onRefused: (refused) => {
      nats.refused = refused;
    },
  });
  natsReady
    .then((nc) => ensureWorkStream(nc, config.events.workStream, config.events.workSubjectPrefix))
    .catch((err: unknown) => log.warn({ err: errorMessage(err) }, 'could not make sure of the work stream; its consumers create it too'));
  const caps = new BudgetLeases({ name: 'cap', log, owner: capOwner(keysClient, holder, config.internalTimeoutMs) });
  const balances = new BudgetLeases({ name: 'balance', log, owner: balanceOwner(billingClient, holder, config.internalTimeoutMs) });
  const workspaces = new BudgetLeases({ name: 'workspace budget', log, owner: capOwner(keysClient, holder, config.internalTimeoutMs, 'workspace') });
  const rates = new RateLimiter(rateLeases(log, (dimension) => rateOwner(keysClient, holder, config.internalTimeoutMs, dimension)));
  const keys = new KeyReplica({
    log,
    keys: keysClient,
    refreshMs: config.keyStatesRefreshMs,
    maxStaleMs: config.keyStatesMaxStaleMs,
    timeoutMs: config.internalTimeoutMs,
    // Leases granted under a key's old limits are let go; the next request asks under the new ones.
    onChange: (before, after) => {
      if (before.budgetId !== after.budgetId || before.capUsd !== after.capUsd || !sameSpendLimits(before, after)) caps.forget(after.keyId);
      if (before.budgetId !== after.budgetId || !sameRateLimits(before, after)) rates.forget(after.keyId);
    },
  });
  await keys.start();
  // A change of a key's standing is seen at once rather than at the next poll (the poll is the backstop).
  const keyEvents = natsReady
    .then((nc) => nc.subscribe(`${config.events.eventsSubjectPrefix}.key.>`, { callback: () => keys.nudge() }))
    .catch((err: unknown) => log.warn({ err: errorMessage(err) }, 'no key events: the key states follow by polling alone'));
  const routing = new RoutingReplica({
    log,
    catalog,
    routing: peer(RoutingService, 'conversations'),
    refreshMs: config.routingRefreshMs,
    timeoutMs: config.internalTimeoutMs,
  });
  routing.start();
  caps.start();
  workspaces.start();
  rates.start();
  balances.start();
  const publisher = new WorkPublisher({ log, js: natsReady.then((nc) => jetstream(nc)), maxQueued: config.workQueueMax, metrics });
  const pricing = Pricing.load(config.pricingFile);
  const completions = new Completions({
    log,
    catalog,
    prices: new Prices(pricing),
    pricing,
    keys,
    caps,
    workspaces,
    rates,
    balances,
    routing,
    conversations: new ConversationDirectory({ exchanges: peer(ExchangeService, 'conversations'), timeoutMs: config.internalTimeoutMs }),
    publisher,
    subjects: workSubjects(config.events.workSubjectPrefix),
    settings: {
      headersTimeoutMs: config.headersTimeoutMs,
      idleTimeoutMs: config.idleTimeoutMs,
      streamMaxDurationMs: config.streamMaxDurationMs,
      defaultMaxTokens: config.defaultMaxTokens,
      upstreamApiKeys: config.upstreamApiKeys,
      demoRegions: config.demoRegions,
    },
  });
  const { port, host, metricsPort } = config;
  const lifecycle = { ready: true, draining: false };
  const server = http.createServer(
    { keepAliveTimeout: 65_000, headersTimeout: 20_000, requestTimeout: 30_000 },
    createHandler({ log, completions, metrics, lifecycle, nats, idleTimeoutMs: config.idleTimeoutMs }),
  );
  server.on('clientError', answerFrontDoorClientError);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  log.info({ port, models: catalog.models.length, keys: keys.size }, 'data plane listening');
  if (config.demoRegions.size > 0) {
    const regions = [...config.demoRegions];
    const variables = regions.map((region) => catalog.regions.get(region)?.apiKeyEnv);
    log.info(
      { regions, unset: variables },
      `the demo upstream answers ${regions.join(' and ')} (DEMO_UPSTREAM, no key set): set ${variables.join(', ')} for real answers`,
    );
  }
  const metricsServer = metricsPort > 0 ? await startMetricsServer({ metrics, port: metricsPort, host, log }) : undefined;
  stopGracefully(log, {
    unready: () => {
      lifecycle.ready = false;
    },
    async drain(drainTimeoutMs) {
      lifecycle.draining = true;
      await closeHttpServer(server, drainTimeoutMs);
      // Streams still running past the drain timeout were cut: they are billed for what they
      // produced before their requests end; then what JetStream has not taken yet is retried.
      await completions.drain();
      await publisher.drain(drainTimeoutMs);
    },
    async release() {
      await Promise.allSettled([caps.stop(), workspaces.stop(), rates.stop(), balances.stop(), keys.stop(), routing.stop()]);
      // Never connected: nothing to close (the connection attempt ends with the process).
      const connected = await Promise.race([natsReady, new Promise<undefined>((resolve) => setTimeout(resolve, 0, undefined))]);
      if (connected) {
        (await keyEvents)?.unsubscribe();
        await connected.drain().catch(() => undefined);
      }
      await metricsServer?.close();
    },
  });
} catch (err) {
  log.fatal({ err: (err as Error).message }, 'the data plane could not start');
  process.exit(1);
}
