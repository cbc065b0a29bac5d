import { fileURLToPath } from 'node:url';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { ConfigError, readBool, readDuration, readInt, readString, serviceUrl } from '@switchboard/runtime/config';
import { startPeriodic } from '@switchboard/runtime/periodic';
import { runService } from '@switchboard/runtime/service';
import { CircuitBreakers } from './circuit-breakers.js';
import { Deliveries } from './deliveries.js';
import { Dispatcher } from './dispatcher.js';
import { Endpoints, endpointSecretPurpose } from './endpoints.js';
import { startEventConsumers } from './events.js';
import { Intake } from './intake.js';
import { watchQueue } from './queue-metrics.js';
import { defaultRetrySchedule, RetrySchedule } from './retry-schedule.js';
import { WebhookSender } from './sender.js';
import { registerRoutes, type WebhooksHandlers } from './server.js';

await runService<WebhooksHandlers & { dispatcher: Dispatcher }>({
  name: 'webhooks',
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  // Re-encrypted under the newest data key by `--rotate-data-key`.
  encryptedColumns: [
    { table: 'endpoints', keyColumn: 'id', column: 'secret_encrypted', purpose: endpointSecretPurpose },
    { table: 'endpoints', keyColumn: 'id', column: 'previous_secret_encrypted', purpose: endpointSecretPurpose },
  ],
  async prepare(runtime) {
    const { db, log, recordEvent, meshTokens } = runtime;
    const { dataKeys } = runtime.config;
    const timeoutMs = readDuration('WEBHOOK_TIMEOUT', '15s');
    const leaseMs = readDuration('WEBHOOK_LEASE', '60s');
    // A lease that ends while its attempt still runs would let a second attempt start beside it.
    if (leaseMs <= timeoutMs) throw new ConfigError(`WEBHOOK_LEASE (${leaseMs} ms) must be longer than WEBHOOK_TIMEOUT (${timeoutMs} ms)`);
    const allowPrivateTargets = readBool('WEBHOOKS_ALLOW_PRIVATE_TARGETS', false);
    if (allowPrivateTargets && process.env.NODE_ENV === 'production') {
      throw new ConfigError('WEBHOOKS_ALLOW_PRIVATE_TARGETS=true is refused in production: receivers could reach internal addresses');
    }
    if (allowPrivateTargets) log.warn('WEBHOOKS_ALLOW_PRIVATE_TARGETS=true: deliveries may go to private and loopback addresses');
    const perEndpoint = readInt('WEBHOOK_ENDPOINT_CONCURRENCY', 8);
    const circuits = new CircuitBreakers({ threshold: readInt('WEBHOOK_CIRCUIT_THRESHOLD', 5), cooldownMs: readDuration('WEBHOOK_CIRCUIT_COOLDOWN', '30s') });
    watchQueue(runtime.metrics, { db, circuits });
    const keys = createPeerClient(KeyService, { name: 'keys', url: serviceUrl('keys') }, meshTokens, { caller: 'webhooks' });
    const dispatcher = new Dispatcher({
      db,
      log,
      dataKeys,
      recordEvent,
      sender: new WebhookSender({ allowPrivateTargets, timeoutMs, maxSocketsPerPool: perEndpoint }),
      schedule: RetrySchedule.parse(readString('WEBHOOK_RETRY_SCHEDULE', defaultRetrySchedule)),
      circuits,
      resolveAlertTarget: (keyId) => keys.resolveAlertWebhook({ keyId }, { timeoutMs: 5000 }),
      settings: {
        perEndpoint,
        maxInFlight: readInt('WEBHOOK_MAX_IN_FLIGHT', 256),
        leaseMs,
        pollMs: readDuration('WEBHOOK_POLL_INTERVAL', '1s'),
        disableAfterMs: readDuration('WEBHOOK_DISABLE_AFTER', '5d'),
      },
    });
    const onQueued = dispatcher.wake;
    const endpoints = new Endpoints({ db, log, dataKeys, onQueued });
    return {
      dispatcher,
      endpoints,
      deliveries: new Deliveries({ db, endpoints, onQueued }),
      intake: new Intake({ db, log, recordEvent, onQueued }),
    };
  },
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
  background: (runtime, { intake, dispatcher }) => {
    const prune = startPeriodic({
      name: 'pruning idempotency keys',
      everyMs: readDuration('HOUSEKEEPING_INTERVAL', '1h'),
      log: runtime.log,
      run: () => intake.pruneIdempotencyKeys(),
    });
    return [...startEventConsumers(runtime, intake), dispatcher.start(), prune];
  },
});
