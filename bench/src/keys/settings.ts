import { durationSeconds } from '../scenarios.js';

export const concurrency = 64;
export const minRatio = 0.6;
export const maxP99Ms = 5;
/** Each measurement is two halves, interleaved with the other side of the comparison. */
export const halfSeconds = Math.max(1, Math.round(durationSeconds / 2));
/** A hard cap on the calls of one half, whatever its duration: loops are bounded in count too. */
export const maxCallsPerHalf = 2_000_000;
export const callTimeoutMs = 5_000;
/** Seconds of AuthorizeKey one call at a time, per transport: its latency without queueing. */
export const unloadedSeconds = 2;

export const progress = (message: string) => process.stderr.write(`[bench:keys] ${message}\n`);
