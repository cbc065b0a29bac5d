import { type ServiceName, serviceNames, servicePorts } from '@switchboard/contracts/components';
import { idempotencyBucketOf } from '@switchboard/contracts/nats-permissions';
import {
  type CommonConfig,
  readDuration,
  readEventsConfig,
  readInt,
  readMeshKeyring,
  readNamespace,
  readSecret,
  readString,
  serviceUrl,
} from '@switchboard/runtime/config';
import { AddressRanges } from '@switchboard/runtime/ip';
import type { MeshKeyring } from '@switchboard/runtime/mesh-token';
import type { RestRateLimits } from './rate-limits.js';

type Env = Record<string, string | undefined>;

/**
 * The settings of the gateway (docs/operations.md), read once at start by main.ts and passed
 * down; a malformed value stops the start, naming its variable.
 */
export interface GatewayConfig {
  /** PORT (8080) and HOST: where it listens; METRICS_PORT: its /metrics (0: none). */
  port: number;
  host: string;
  metricsPort: number;
  /** SWITCHBOARD_MESH_KEYS / SWITCHBOARD_MESH_SECRET: the key it signs its mesh tokens with (docs/api/internal-calls.md#mesh-keys). */
  meshKeys: MeshKeyring;
  /**
   * SWITCHBOARD_IDEMPOTENCY_SECRET (at least 32 bytes): seals the Idempotency-Key answers kept in
   * NATS and keys their fingerprints, and nothing else (docs/conventions.md#idempotency).
   */
  idempotencySecret: string;
  events: Pick<CommonConfig, 'natsUrl' | 'natsSeed' | 'eventsSubjectPrefix' | 'eventsStream'>;
  /** <SERVICE>_URL: where each service answers. */
  serviceUrls: Record<ServiceName, string>;
  /** GATEWAY_KEY_CACHE_TTL: how long an API key's standing is cached. */
  keyCacheTtlMs: number;
  /** REVOCATION_POLL_INTERVAL: how often revoked sessions are polled when events are late. */
  revocationPollIntervalMs: number;
  /** DATA_PLANE_URL: where /v1/chat/completions and /v1/models are forwarded (no trailing slash). */
  dataPlaneUrl: string;
  /** DATA_PLANE_TIMEOUT: how long the data plane may take to start its answer (mesh calls, an upstream and its failover). */
  dataPlaneTimeoutMs: number;
  /** GATEWAY_TRUSTED_PROXIES: the proxies whose X-Forwarded-For and trace context are believed. */
  trustedProxies: AddressRanges;
  /**
   * REST_RATE_LIMIT_PER_MINUTE and REST_RATE_LIMIT_PER_IP_PER_MINUTE: requests per minute and
   * replica, per principal and per client address (docs/conventions.md#rate-limits).
   */
  rateLimits: RestRateLimits;
  /** The JetStream KV bucket of the Idempotency-Key answers: one per namespace (SWITCHBOARD_NAMESPACE). */
  idempotencyBucket: string;
}

export function readGatewayConfig(env: Env = process.env): GatewayConfig {
  return {
    port: readInt('PORT', 8080, env),
    host: readString('HOST', '0.0.0.0', env),
    metricsPort: readInt('METRICS_PORT', 0, env),
    meshKeys: readMeshKeyring('gateway', env),
    idempotencySecret: readSecret('SWITCHBOARD_IDEMPOTENCY_SECRET', env),
    events: readEventsConfig(env),
    serviceUrls: Object.fromEntries(serviceNames.map((name) => [name, serviceUrl(name, servicePorts[name], env)])) as Record<ServiceName, string>,
    keyCacheTtlMs: readDuration('GATEWAY_KEY_CACHE_TTL', '1s', env),
    revocationPollIntervalMs: readDuration('REVOCATION_POLL_INTERVAL', '10s', env, 1),
    dataPlaneUrl: readString('DATA_PLANE_URL', 'http://127.0.0.1:8081', env).replace(/\/+$/, ''),
    dataPlaneTimeoutMs: readDuration('DATA_PLANE_TIMEOUT', '150s', env),
    trustedProxies: AddressRanges.parse(readString('GATEWAY_TRUSTED_PROXIES', '', env), 'GATEWAY_TRUSTED_PROXIES'),
    // docs/conventions.md#rate-limits: why these defaults (an office of 100 behind one address never meets them).
    rateLimits: {
      perPrincipal: readInt('REST_RATE_LIMIT_PER_MINUTE', 1200, env, 1),
      perAddress: readInt('REST_RATE_LIMIT_PER_IP_PER_MINUTE', 600, env, 1),
    },
    idempotencyBucket: idempotencyBucketOf(readNamespace(env)),
  };
}
