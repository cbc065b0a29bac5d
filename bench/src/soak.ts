/**
 * Soak bench: the chaos run's mixed load, without faults, for a long while, watching memory.
 *
 *   npm run bench:soak   (SOAK_MINUTES, default 10: the whole load; SOAK_WARMUP_MINUTES, default
 *                         4: the part of it before the baseline; SOAK_RATE, default 40:
 *                         operations started per second; SOAK_SAMPLE_SECONDS, default 10)
 *
 * The world of `npm run bench:chaos` (a private Postgres and nats-server, the mesh on them, a
 * local upstream and webhook receiver) under a steady mixed load of sign-ins, key checks that
 * record usage, conversation appends and agent.completed events. Every component's RSS
 * (/proc/<pid>/status VmRSS) is sampled all along; the baseline is the median of the minute
 * after the warm-up, the end the median of the last minute (a collection that shrinks the heap
 * for one sample moves neither). Target: every component grows by less than
 * 10 % from its baseline to the end. Beside it, the V8 old space each component uses (from its
 * /metrics), the lowest reading of the baseline minute and of the last one: what survives
 * collections, where a leak shows when RSS only follows the heap's sizing. Then the chaos invariants (every request answered, nothing
 * lost, nothing charged twice) for the whole run. Prints RSS over time (a column a minute) and
 * the growth per component, writes every sample to bench/results/soak-<time>.json; exits 1 if a
 * target or an invariant did not hold.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { components } from '@switchboard/runtime/dev/mesh';
import { checkInvariants } from '@switchboard/testkit/chaos/invariants';
import { defaultLoadOptions, MixedLoad, prepareAccount } from '@switchboard/testkit/chaos/mixed-load';
import { startChaosWorld } from '@switchboard/testkit/chaos/world';
import { readMemory } from './proc.js';
import { fmt, runBench, table } from './report.js';

const number = (name: string, fallback: number) => {
  const raw = process.env[name];
  return raw && /^\d+(\.\d+)?$/.test(raw) ? Number(raw) : fallback;
};

const resultsDir = fileURLToPath(new URL('../results/', import.meta.url));
const minutes = number('SOAK_MINUTES', 10);
// V8 sizes its heaps to the load for the first 3–4 minutes (RSS climbs, then holds): growth is
// measured from there.
const warmupMinutes = number('SOAK_WARMUP_MINUTES', 4);
const sampleSeconds = number('SOAK_SAMPLE_SECONDS', 10);
/** Growth of a component's RSS from the baseline to the end that fails the run. */
const growthLimitPct = 10;

type Component = (typeof components)[number];

interface Sample {
  /** Seconds into the load. */
  at: number;
  rssMb: Partial<Record<Component, number>>;
  /** V8's old space in use (prom-client's nodejs_heap_space_size_used_bytes{space="old"}), MB. */
  oldSpaceMb: Partial<Record<Component, number>>;
  /** RSS less the heap V8 has reserved (nodejs_heap_size_total_bytes): native memory, MB. */
  outsideHeapMb: Partial<Record<Component, number>>;
}

/** Of a component's V8 heap now, from its /metrics: the old space in use and the whole heap reserved, MB. */
async function v8Heap(metricsUrl: string): Promise<{ oldSpaceMb?: number; totalMb?: number }> {
  const text = await fetch(metricsUrl, { signal: AbortSignal.timeout(2000) })
    .then((response) => response.text())
    .catch(() => '');
  const megabytes = (pattern: RegExp) => {
    const match = pattern.exec(text);
    return match ? Number(match[1]) / 2 ** 20 : undefined;
  };
  return {
    oldSpaceMb: megabytes(/^nodejs_heap_space_size_used_bytes\{[^}]*space="old"[^}]*\} (\d+)/m),
    totalMb: megabytes(/^nodejs_heap_size_total_bytes(?:\{[^}]*\})? (\d+)/m),
  };
}

/** The middle value: one collection that shrinks the heap for a sample, or a peak, does not move it. */
const median = (values: number[]) => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

runBench(async () => {
  const started = performance.now();
  const world = await startChaosWorld({
    onComponentExit: (component, code, lastLines) => console.error(`${component} exited on its own (${code}):\n${lastLines.join('\n')}`),
  });
  try {
    const account = await prepareAccount(world.mesh.gatewayUrl, world.webhookUrl);
    const load = new MixedLoad(world.mesh, account, { ...defaultLoadOptions, ratePerSecond: number('SOAK_RATE', 40) });
    const samples: Sample[] = [];
    const sample = async () => {
      const at = (Date.now() - load.startedAt) / 1000;
      const rssMb: Sample['rssMb'] = {};
      const oldSpace: Sample['oldSpaceMb'] = {};
      const outsideHeap: Sample['outsideHeapMb'] = {};
      for (const component of components) {
        const heap = await v8Heap(world.mesh.metricsUrls[component]);
        const memory = readMemory(world.mesh.pid(component));
        if (memory) rssMb[component] = memory.rssMb;
        oldSpace[component] = heap.oldSpaceMb;
        if (memory && heap.totalMb !== undefined) outsideHeap[component] = memory.rssMb - heap.totalMb;
      }
      samples.push({ at, rssMb, oldSpaceMb: oldSpace, outsideHeapMb: outsideHeap });
    };
    load.start();
    await sample();
    const sampler = setInterval(() => void sample(), sampleSeconds * 1000);
    await new Promise((resolve) => setTimeout(resolve, minutes * 60_000));
    clearInterval(sampler);
    await sample();
    await load.stop();
    const invariants = await checkInvariants(world, load, account, { retriedAppendsMayRepeat: false, settleMs: 30_000 });

    const warmupEnd = warmupMinutes * 60;
    const end = samples[samples.length - 1].at;
    const valuesIn = (from: number, to: number, values: (s: Sample) => number | undefined) =>
      samples
        .filter((s) => s.at >= from && s.at <= to)
        .map(values)
        .filter((value): value is number => value !== undefined);
    const rows = components.map((component) => {
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

    const minuteMarks = Array.from({ length: Math.floor(end / 60) + 1 }, (_, i) => i * 60);
    const overTime = table(
      ['RSS (MB)', ...minuteMarks.map((at) => `${at / 60} min`)],
      components.map((component) => [
        component,
        ...minuteMarks.map((at) => {
          const nearest = samples.reduce((best, s) => (Math.abs(s.at - at) < Math.abs(best.at - at) ? s : best), samples[0]);
          return fmt(nearest.rssMb[component], 1);
        }),
      ]),
    );
    const growth = table(
      [
        'component',
        `RSS baseline (${warmupMinutes}–${warmupMinutes + 1} min)`,
        'RSS end (last min)',
        'RSS max',
        'RSS growth',
        `< ${growthLimitPct} %`,
        'live old space: baseline → end',
        'outside the V8 heap: baseline → end',
      ],
      rows.map((row) => [
        row.component,
        fmt(row.baseline, 1),
        fmt(row.last, 1),
        fmt(row.max, 1),
        `${fmt(row.growthPct, 1)} %`,
        row.holds ? '✓' : '✗',
        `${fmt(row.liveBaseline, 1)} → ${fmt(row.liveLast, 1)} MB`,
        `${fmt(row.outsideBaseline, 1)} → ${fmt(row.outsideLast, 1)} MB`,
      ]),
    );
    const checks = table(
      ['', 'invariant (whole run)', 'detail'],
      invariants.map((result) => [result.holds ? '✓' : '✗', result.name, result.detail]),
      3,
    );
    const passed = rows.every((row) => row.holds) && invariants.every((result) => result.holds);
    await mkdir(resultsDir, { recursive: true });
    const file = path.join(resultsDir, `soak-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    await writeFile(file, `${JSON.stringify({ minutes, warmupMinutes, sampleSeconds, rows, invariants, samples }, null, 2)}\n`);
    console.log(
      [
        `Soak: ${minutes} min of mixed load at ${number('SOAK_RATE', 40)} operations/s (${load.attempts.length} attempts), RSS sampled every ${sampleSeconds} s`,
        '',
        overTime,
        '',
        growth,
        '',
        checks,
        '',
        `samples: ${path.relative(process.cwd(), file)}`,
        `bench:soak ${passed ? 'PASSED' : 'FAILED'} in ${Math.round((performance.now() - started) / 1000)} s (mesh start included)`,
      ].join('\n'),
    );
    return passed ? 0 : 1;
  } finally {
    await world.stop();
  }
});
