import { envPositiveInt } from '../measure/settings.js';
import { durationSeconds } from '../scenarios.js';

export const concurrency = 64;
export const lowLoadSeconds = envPositiveInt('BENCH_LOW_LOAD_SECONDS', 6, 600);
export const lowInFlight = [1, 4] as const;
/** Seconds of each step of a front-door request alone, 1 in flight (where the added latency goes). */
export const stageSeconds = 3;
/** The paced run: 1 in flight with this pause after each answer, for this long per target. */
export const pacedPauseMs = 40;
export const pacedSeconds = 8;
export const halfSeconds = Math.max(1, durationSeconds / 2);
/** Targets (issue 23): what the front door adds at 1 in flight, its rate at `concurrency` in flight, and what a request costs the platform. */
export const maxAddedP50Ms = 1;
export const maxAddedP99Ms = 3;
export const minFrontPerSecond = 2000;
/** CPU µs per request, summed over every process of the platform (results.ts platformProcesses). */
export const maxPlatformCpuMicrosPerRequest = 1000;
export const maxTransactionsPerRequest = 0.1;
/** A key with every limit set keeps at least this share of the req/s of a key without (issue 25: within 10 %). */
export const minLimitedKeyRatio = 0.9;
/** A hard cap on the requests of one run, whatever its duration: loops are bounded in count too. */
export const maxRequestsPerRun = 2_000_000;
export const requestTimeoutMs = 10_000;
/** Tokens of each answer (the upstream's `words`), and the request's max_tokens. */
export const answerTokens = 8;
export const topUpUsd = '10.00';
/**
 * How long the key's spend and the balance may stand still short of the answered costs before
 * the check fails (settlement is asynchronous: a backlog being applied moves them), and the
 * longest wait in all.
 */
export const settle = { stallTimeoutMs: 30_000, maxWaitMs: 10 * 60_000 };

export const passthroughModel = 'bench-passthrough';
export const fastModels = ['bench-fast-overseas', 'bench-fast-cn'];
export const catalogPrice = '0.000001';
