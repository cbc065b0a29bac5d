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
export const minRatio = 0.5;
export const maxAddedP50Ms = 3;
export const maxAddedP99Ms = 10;
/** A hard cap on the requests of one run, whatever its duration: loops are bounded in count too. */
export const maxRequestsPerRun = 2_000_000;
export const requestTimeoutMs = 10_000;
/** Tokens of each answer (the upstream's `words`), and the request's max_tokens. */
export const answerTokens = 8;
export const topUpUsd = '10.00';
/** How long the keys service may take to show the spend after the last request before the check fails. */
export const spendVisibleTimeoutMs = 30_000;

export const passthroughModel = 'bench-passthrough';
export const fastModels = ['bench-fast-overseas', 'bench-fast-cn'];
export const catalogPrice = '0.000001';
