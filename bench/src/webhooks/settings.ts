import { envPositiveInt } from '../measure/settings.js';

export const concurrency = 64;
export const events = envPositiveInt('BENCH_WEBHOOK_EVENTS', 3000, 1_000_000);
export const warmupEvents = envPositiveInt('BENCH_WEBHOOK_WARMUP_EVENTS', 500, 100_000);
export const latencySeconds = envPositiveInt('BENCH_LATENCY_SECONDS', 10, 600);
export const jetstreamSeconds = envPositiveInt('BENCH_JETSTREAM_SECONDS', 3, 60);
export const endpointConcurrency = envPositiveInt('BENCH_WEBHOOK_ENDPOINT_CONCURRENCY', 32, 1024);
/** Webhook deliveries per second against the raw single-row INSERT loop of the same run (docs/operations.md). */
export const minRatioToInserts = 0.5;
export const maxP99Ms = 50;
/** The fairness scenario's bound on the healthy workspace's p99 (docs/webhooks.md#fairness). */
export const maxFairP99Ms = 1000;
/** A hard cap on the publishes of one JetStream run, whatever its duration. */
export const maxJetstreamPublishes = 2_000_000;
/** How long the receiver may wait for the last events after the last publish answered before they count as lost. */
export const receiptTimeoutMs = 60_000;
export const callTimeoutMs = 10_000;
