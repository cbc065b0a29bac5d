import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import type { ServiceRuntime } from '@switchboard/runtime/service';
import { CircuitBreakers } from './circuit-breakers.js';
import type { WebhooksConfig } from './config.js';
import { Deliveries } from './deliveries.js';
import { Dispatcher } from './dispatcher.js';
import { Endpoints } from './endpoints.js';
import { Intake } from './intake.js';
import { watchQueue } from './queue-metrics.js';
import { Retention } from './retention.js';
import { WebhookSender } from './sender.js';
import type { WebhooksHandlers } from './server.js';

/** What the webhooks handlers are built from: the parts of the service runtime they use. */
export type WebhooksRuntime = Pick<ServiceRuntime, 'db' | 'log' | 'recordEvent' | 'recordEvents' | 'meshTokens' | 'metrics' | 'audit'> & {
  config: Pick<ServiceRuntime['config'], 'dataKeys'>;
};

/** The domain modules behind the webhooks handlers, as main.ts (and the in-process test) builds them. */
export function prepareWebhooks(runtime: WebhooksRuntime, config: WebhooksConfig): WebhooksHandlers & { dispatcher: Dispatcher; retention: Retention } {
  const { db, log, recordEvent, recordEvents, meshTokens } = runtime;
  const { dataKeys } = runtime.config;
  if (config.allowPrivateTargets) log.warn('WEBHOOKS_ALLOW_PRIVATE_TARGETS=true: deliveries may go to private and loopback addresses');
  const circuits = new CircuitBreakers({ threshold: config.circuitThreshold, cooldownMs: config.circuitCooldownMs });
  watchQueue(runtime.metrics, { db, circuits });
  const keys = createPeerClient(KeyService, { name: 'keys', url: config.keysUrl }, meshTokens, { caller: 'webhooks' });
  const dispatcher = new Dispatcher({
    db,
    log,
    dataKeys,
    recordEvent,
    recordEvents,
    sender: new WebhookSender({
      allowPrivateTargets: config.allowPrivateTargets,
      timeoutMs: config.timeoutMs,
      maxSocketsPerPool: config.perEndpoint,
      dnsTimeoutMs: config.dnsTimeoutMs,
      dnsServers: config.dnsServers,
    }),
    schedule: config.retrySchedule,
    circuits,
    resolveAlertTarget: (keyId) => keys.resolveAlertWebhook({ keyId }, { timeoutMs: 5000 }),
    settings: {
      perEndpoint: config.perEndpoint,
      perWorkspace: config.perWorkspace,
      maxInFlight: config.maxInFlight,
      leaseMs: config.leaseMs,
      pollMs: config.pollMs,
      disableAfterMs: config.disableAfterMs,
    },
  });
  const onQueued = dispatcher.wake;
  const endpoints = new Endpoints({ db, log, dataKeys, audit: runtime.audit, onQueued, maxEndpoints: config.maxEndpoints });
  return {
    dispatcher,
    retention: new Retention({ db, log, retentionMs: config.retentionMs }),
    endpoints,
    deliveries: new Deliveries({ db, endpoints, onQueued, manualCallsPerMinute: config.manualCallsPerMinute }),
    intake: new Intake({ db, log, recordEvents, onQueued }),
  };
}
