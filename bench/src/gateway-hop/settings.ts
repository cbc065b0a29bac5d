import { envPositiveInt } from '../measure/settings.js';

/** BENCH_ROUNDS: rounds of the interleaved latency runs (direct, gateway, gateway, direct). */
export const rounds = envPositiveInt('BENCH_ROUNDS', 4, 50);
/** BENCH_SECONDS: seconds per target per round at 1 in flight. */
export const latencySeconds = envPositiveInt('BENCH_SECONDS', 2, 600);
/** BENCH_LOAD_SECONDS: seconds of the CPU runs at `loadInFlight`. */
export const loadSeconds = envPositiveInt('BENCH_LOAD_SECONDS', 5, 600);
export const loadInFlight = 8;
/** Streams per target whose first byte is timed. */
export const streams = 100;
/** The echo's pause between a stream's first event and the rest: what a hop that buffers would add. */
export const streamGapMs = 50;
