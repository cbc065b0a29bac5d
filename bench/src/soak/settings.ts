import { envNumber } from '../measure/settings.js';

export const minutes = envNumber('SOAK_MINUTES', 10);
// V8 sizes its heaps to the load for the first 3–4 minutes (RSS climbs, then holds): growth is
// measured from there.
export const warmupMinutes = envNumber('SOAK_WARMUP_MINUTES', 4);
export const sampleSeconds = envNumber('SOAK_SAMPLE_SECONDS', 10);
export const ratePerSecond = envNumber('SOAK_RATE', 40);
/** Growth of a component's RSS from the baseline to the end that fails the run. */
export const growthLimitPct = 10;
