import { servicePorts } from '@switchboard/contracts/components';
import { ConfigError, readBool, readDuration, readInt, readString, serviceUrl } from '@switchboard/runtime/config';
import { checkDnsServers } from './resolver.js';
import { defaultRetrySchedule, RetrySchedule } from './retry-schedule.js';

/**
 * The settings of the webhooks service (docs/operations.md, docs/webhooks.md), read once at
 * start by main.ts and passed down; a malformed value stops the start, naming its variable.
 */
export interface WebhooksConfig {
  /** WEBHOOK_TIMEOUT: the deadline of one attempt. */
  timeoutMs: number;
  /** WEBHOOK_LEASE: how long a claimed delivery is held; longer than the timeout. */
  leaseMs: number;
  /** WEBHOOKS_ALLOW_PRIVATE_TARGETS: deliveries may go to private and loopback addresses (refused in production). */
  allowPrivateTargets: boolean;
  /** WEBHOOK_ENDPOINT_CONCURRENCY: attempts at once per endpoint. */
  perEndpoint: number;
  /** WEBHOOK_MAX_IN_FLIGHT: attempts at once in this process. */
  maxInFlight: number;
  /** WEBHOOK_WORKSPACE_CONCURRENCY: attempts at once per workspace in this process. */
  perWorkspace: number;
  /** WEBHOOK_MAX_ENDPOINTS: webhook endpoints a workspace may have. */
  maxEndpoints: number;
  /** WEBHOOK_MANUAL_CALLS_PER_MINUTE: tests, redeliveries and recoveries of one endpoint in a sliding minute. */
  manualCallsPerMinute: number;
  /** WEBHOOK_DNS_TIMEOUT: how long a receiver's name may take to resolve. */
  dnsTimeoutMs: number;
  /** WEBHOOK_DNS_SERVERS: the name servers asked instead of the system's (empty: the system's). */
  dnsServers: string[];
  /** WEBHOOK_CIRCUIT_THRESHOLD and WEBHOOK_CIRCUIT_COOLDOWN: an endpoint's circuit breaker. */
  circuitThreshold: number;
  circuitCooldownMs: number;
  /** WEBHOOK_RETRY_SCHEDULE: the waits between attempts. */
  retrySchedule: RetrySchedule;
  /** WEBHOOK_POLL_INTERVAL: how often due deliveries are looked for without a wake-up. */
  pollMs: number;
  /** WEBHOOK_DISABLE_AFTER: an endpoint failing this long is disabled. */
  disableAfterMs: number;
  /** WEBHOOK_RETENTION: how long deliveries, their attempts and events are kept. */
  retentionMs: number;
  /** HOUSEKEEPING_INTERVAL: how often expired PublishEvent idempotency keys are pruned and retention runs. */
  housekeepingIntervalMs: number;
  /** KEYS_URL: where the keys service answers (alert webhooks). */
  keysUrl: string;
}

export function readWebhooksConfig(env: Record<string, string | undefined> = process.env): WebhooksConfig {
  const timeoutMs = readDuration('WEBHOOK_TIMEOUT', '15s', env);
  const leaseMs = readDuration('WEBHOOK_LEASE', '60s', env);
  // A lease that ends while its attempt still runs would let a second attempt start beside it.
  if (leaseMs <= timeoutMs) throw new ConfigError(`WEBHOOK_LEASE (${leaseMs} ms) must be longer than WEBHOOK_TIMEOUT (${timeoutMs} ms)`);
  const allowPrivateTargets = readBool('WEBHOOKS_ALLOW_PRIVATE_TARGETS', false, env);
  if (allowPrivateTargets && env.NODE_ENV === 'production') {
    throw new ConfigError('WEBHOOKS_ALLOW_PRIVATE_TARGETS=true is refused in production: receivers could reach internal addresses');
  }
  return {
    timeoutMs,
    leaseMs,
    allowPrivateTargets,
    perEndpoint: readInt('WEBHOOK_ENDPOINT_CONCURRENCY', 8, env, 1),
    maxInFlight: readInt('WEBHOOK_MAX_IN_FLIGHT', 256, env, 1),
    perWorkspace: readInt('WEBHOOK_WORKSPACE_CONCURRENCY', 32, env, 1),
    maxEndpoints: readInt('WEBHOOK_MAX_ENDPOINTS', 50, env, 1),
    manualCallsPerMinute: readInt('WEBHOOK_MANUAL_CALLS_PER_MINUTE', 30, env, 1),
    dnsTimeoutMs: readDuration('WEBHOOK_DNS_TIMEOUT', '5s', env, 1),
    dnsServers: readDnsServers(env),
    circuitThreshold: readInt('WEBHOOK_CIRCUIT_THRESHOLD', 5, env),
    circuitCooldownMs: readDuration('WEBHOOK_CIRCUIT_COOLDOWN', '30s', env),
    retrySchedule: RetrySchedule.parse(readString('WEBHOOK_RETRY_SCHEDULE', defaultRetrySchedule, env)),
    pollMs: readDuration('WEBHOOK_POLL_INTERVAL', '1s', env, 1),
    disableAfterMs: readDuration('WEBHOOK_DISABLE_AFTER', '5d', env),
    retentionMs: readDuration('WEBHOOK_RETENTION', '30d', env, 3_600_000),
    housekeepingIntervalMs: readDuration('HOUSEKEEPING_INTERVAL', '1h', env, 1),
    keysUrl: serviceUrl('keys', servicePorts.keys, env),
  };
}

/** WEBHOOK_DNS_SERVERS: comma-separated `address` or `address:port` (IPv6 as `[address]:port`). */
function readDnsServers(env: Record<string, string | undefined>): string[] {
  const servers = readString('WEBHOOK_DNS_SERVERS', '', env)
    .split(',')
    .map((server) => server.trim())
    .filter(Boolean);
  const problem = checkDnsServers(servers);
  if (problem) throw new ConfigError(`WEBHOOK_DNS_SERVERS: ${problem}`);
  return servers;
}
