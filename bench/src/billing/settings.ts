import { envPositiveInt } from '../measure/settings.js';

export const concurrency = 64;
/** Several workspaces, because every debit of a workspace updates its one balance row (billing.ts). */
export const workspaces = envPositiveInt('BENCH_BILLING_WORKSPACES', 16);
export const minRatio = 0.2;
/** A hard cap on the calls of one run, whatever its duration: loops are bounded in count too. */
export const maxCalls = 2_000_000;
export const callTimeoutMs = 10_000;
/** How long the keys service may take to show the usages after the last answer before the run fails. */
export const visibleTimeoutMs = 60_000;
/** Between two reads of a key's spend that is not complete yet (one request in flight: the polling costs the mesh little). */
export const pollIntervalMs = 25;
/** What each call records: service/fast, 1000 × 0.10/1M + 500 × 0.40/1M (pricing.json). */
export const usageShape = { model: 'service/fast', inputTokens: 1000n, outputTokens: 500n };
