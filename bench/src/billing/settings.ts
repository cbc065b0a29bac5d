import { envPositiveInt } from '../measure/settings.js';

export const concurrency = 64;
/** Several workspaces, because every debit of a workspace updates its one balance row (billing.ts). */
export const workspaces = envPositiveInt('BENCH_BILLING_WORKSPACES', 16);
/** Usages/s end to end through the work stream ÷ raw single-row inserts/s of the same run (issue 23). */
export const minRatio = 1.0;
/** A hard cap on the calls of one run, whatever its duration: loops are bounded in count too. */
export const maxCalls = 2_000_000;
export const callTimeoutMs = 10_000;
/**
 * How long a key's spend may stand still before the run fails while it does not show every usage
 * yet (a backlog being applied moves it), and the longest wait in all.
 */
export const visibility = { stallTimeoutMs: 30_000, maxWaitMs: 15 * 60_000 };
/** Between two reads of a key's spend that is not complete yet (one request in flight: the polling costs the mesh little). */
export const pollIntervalMs = 25;
/** What each usage is: service/fast, 1000 × 0.10/1M + 500 × 0.40/1M (pricing.json). */
export const usageShape = { model: 'service/fast', inputTokens: 1000n, outputTokens: 500n };
