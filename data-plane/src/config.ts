import { servicePorts } from '@switchboard/contracts/components';
import {
  type CommonConfig,
  ConfigError,
  readBool,
  readDuration,
  readEventsConfig,
  readInt,
  readMeshKeyring,
  readString,
  serviceUrl,
} from '@switchboard/runtime/config';
import type { MeshKeyring } from '@switchboard/runtime/mesh-token';
import type { ModelCatalog, Region } from '@switchboard/runtime/model-catalog';
import { defaultPricingPath } from '@switchboard/runtime/pricing';

type Env = Record<string, string | undefined>;

/**
 * The settings of the data plane (docs/operations.md), read once at start by main.ts and passed
 * down; a malformed value stops the start, naming its variable.
 */
export interface DataPlaneConfig {
  /** PORT (8081) and HOST: where it listens; METRICS_PORT: its /metrics (0: none). */
  port: number;
  host: string;
  metricsPort: number;
  /** SWITCHBOARD_MESH_KEYS / SWITCHBOARD_MESH_SECRET: the key it signs its mesh tokens with (docs/api/internal-calls.md#mesh-keys). */
  meshKeys: MeshKeyring;
  /** KEYS_URL, BILLING_URL, CONVERSATIONS_URL: its peers. */
  urls: { keys: string; billing: string; conversations: string };
  /** UPSTREAM_TIMEOUT: how long an upstream may take to start its answer. */
  headersTimeoutMs: number;
  /** UPSTREAM_IDLE_TIMEOUT: how long a stream may stay silent, and its client leave it unread. */
  idleTimeoutMs: number;
  /** STREAM_MAX_DURATION: how long a stream may last from its request's arrival; then it is cut and billed for what was produced. */
  streamMaxDurationMs: number;
  /** DEFAULT_MAX_TOKENS: the output assumed for the estimate when a request sets none. */
  defaultMaxTokens: number;
  /** ROUTING_REFRESH: how often the routing scores are read from the conversations service. */
  routingRefreshMs: number;
  /** The variables the catalog's regions name (`api_key_env`), with their values. */
  upstreamApiKeys: Record<string, string | undefined>;
  /**
   * DEMO_UPSTREAM (false; `npm start` sets true): the regions whose `api_key_env` is unset or
   * empty, answered by the demo upstream in this process (demo-upstream.ts). Refused with NODE_ENV=production.
   */
  demoRegions: ReadonlySet<Region>;
  /** NATS, the event subjects (key changes) and the work stream usage goes to. */
  events: Pick<CommonConfig, 'natsUrl' | 'natsSeed' | 'eventsSubjectPrefix' | 'eventsStream' | 'workSubjectPrefix' | 'workStream'>;
  /** KEY_STATES_REFRESH: how often the key replica asks for changes (the revocation bound's backstop). */
  keyStatesRefreshMs: number;
  /** KEY_STATES_MAX_STALE: after this long without reaching the keys service, requests are refused with 503. */
  keyStatesMaxStaleMs: number;
  /** WORK_QUEUE_MAX: usage records (and exchanges) that may wait here while JetStream refuses them. */
  workQueueMax: number;
  /** INTERNAL_TIMEOUT: the deadline of each call to a peer (leases, key states, routing). */
  internalTimeoutMs: number;
  /** SWITCHBOARD_PRICING_FILE: the prices billing debits with (default: runtime/pricing.json). */
  pricingFile: string;
}

export function readDataPlaneConfig(catalog: ModelCatalog, env: Env = process.env): DataPlaneConfig {
  const apiKeyVariables = [...catalog.regions.values()].map((region) => region.apiKeyEnv);
  const demoUpstream = readBool('DEMO_UPSTREAM', false, env);
  // A production data plane answering canned text, billed as completions, would be a silent outage.
  if (demoUpstream && env.NODE_ENV === 'production') {
    throw new ConfigError("DEMO_UPSTREAM=true is refused with NODE_ENV=production: set each region's API key variable and unset DEMO_UPSTREAM");
  }
  return {
    port: readInt('PORT', 8081, env),
    host: readString('HOST', '0.0.0.0', env),
    metricsPort: readInt('METRICS_PORT', 0, env),
    meshKeys: readMeshKeyring('data-plane', env),
    urls: {
      keys: serviceUrl('keys', servicePorts.keys, env),
      billing: serviceUrl('billing', servicePorts.billing, env),
      conversations: serviceUrl('conversations', servicePorts.conversations, env),
    },
    headersTimeoutMs: readDuration('UPSTREAM_TIMEOUT', '60s', env),
    idleTimeoutMs: readDuration('UPSTREAM_IDLE_TIMEOUT', '60s', env),
    // A length of 0 would cut every stream at its first byte.
    streamMaxDurationMs: readDuration('STREAM_MAX_DURATION', '10m', env, 1),
    defaultMaxTokens: readInt('DEFAULT_MAX_TOKENS', 4096, env, 1),
    // Every data plane reads each tier's scores this often: more often would only load conversations.
    routingRefreshMs: readDuration('ROUTING_REFRESH', '1s', env, 100),
    upstreamApiKeys: Object.fromEntries(apiKeyVariables.map((name) => [name, env[name]])),
    demoRegions: new Set(demoUpstream ? [...catalog.regions].flatMap(([name, region]) => (env[region.apiKeyEnv] ? [] : [name])) : []),
    events: readEventsConfig(env),
    keyStatesRefreshMs: readDuration('KEY_STATES_REFRESH', '250ms', env, 10),
    keyStatesMaxStaleMs: readDuration('KEY_STATES_MAX_STALE', '30s', env, 1000),
    workQueueMax: readInt('WORK_QUEUE_MAX', 10_000, env, 1),
    internalTimeoutMs: readDuration('INTERNAL_TIMEOUT', '5s', env, 100),
    pricingFile: readString('SWITCHBOARD_PRICING_FILE', defaultPricingPath, env),
  };
}
