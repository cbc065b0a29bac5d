import { components } from '@switchboard/runtime/dev/mesh';
import type { Sample } from './samples.js';
import { growthLimitPct, warmupMinutes } from './settings.js';

/** The middle value: one collection that shrinks the heap for a sample, or a peak, does not move it. */
const median = (values: number[]) => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

/**
 * Per component, from the minute after the warm-up (the baseline) to the last minute: the median
 * RSS and its growth (the target), the lowest old-space reading, and the memory outside V8's heap.
 */
export function growthRows(samples: Sample[]) {
  const warmupEnd = warmupMinutes * 60;
  const end = samples[samples.length - 1].at;
  const valuesIn = (from: number, to: number, values: (s: Sample) => number | undefined) =>
    samples
      .filter((s) => s.at >= from && s.at <= to)
      .map(values)
      .filter((value): value is number => value !== undefined);
  return components.map((component) => {
    const rss = (s: Sample) => s.rssMb[component];
    const baseline = median(valuesIn(warmupEnd, warmupEnd + 60, rss));
    const last = median(valuesIn(end - 60, end, rss));
    const max = Math.max(...valuesIn(0, end, rss));
    const growthPct = ((last - baseline) / baseline) * 100;
    // What survives collections: the lowest old-space reading of a minute (samples fall
    // anywhere between collections; the lowest is nearest to the live heap after one).
    const old = (s: Sample) => s.oldSpaceMb[component];
    const liveBaseline = Math.min(...valuesIn(warmupEnd, warmupEnd + 60, old));
    const liveLast = Math.min(...valuesIn(end - 60, end, old));
    // Native memory (argon2's buffers, TLS, the allocator's arenas) apart from V8's heap sizing.
    const outside = (s: Sample) => s.outsideHeapMb[component];
    const outsideBaseline = median(valuesIn(warmupEnd, warmupEnd + 60, outside));
    const outsideLast = median(valuesIn(end - 60, end, outside));
    return { component, baseline, last, max, growthPct, liveBaseline, liveLast, outsideBaseline, outsideLast, holds: growthPct < growthLimitPct };
  });
}

export type GrowthRow = ReturnType<typeof growthRows>[number];
