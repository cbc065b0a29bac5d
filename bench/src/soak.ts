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
 * the growth per component; exits 1 if a target or an invariant did not hold.
 */
import { components } from '@switchboard/runtime/dev/mesh';
import { checkInvariants } from './chaos/invariants.js';
import { defaultLoadOptions, MixedLoad, prepareAccount } from './chaos/mixed-load.js';
import { startChaosWorld } from './chaos/world.js';
import { readMemory } from './proc.js';
import { fmt, runBench, table } from './report.js';

const number = (name: string, fallback: number) => {
  const raw = process.env[name];
  return raw && /^\d+(\.\d+)?$/.test(raw) ? Number(raw) : fallback;
};

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
}

/** The old space a component's V8 heap uses now, from its /metrics; undefined if it does not answer. */
async function oldSpaceMb(metricsUrl: string): Promise<number | undefined> {
  const text = await fetch(metricsUrl, { signal: AbortSignal.timeout(2000) })
    .then((response) => response.text())
    .catch(() => '');
  const match = /^nodejs_heap_space_size_used_bytes\{[^}]*space="old"[^}]*\} (\d+)/m.exec(text);
  return match ? Number(match[1]) / 2 ** 20 : undefined;
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
      for (const component of components) {
        const memory = readMemory(world.mesh.pid(component));
        if (memory) rssMb[component] = memory.rssMb;
        oldSpace[component] = await oldSpaceMb(world.mesh.metricsUrls[component]);
      }
      samples.push({ at, rssMb, oldSpaceMb: oldSpace });
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
      return { component, baseline, last, max, growthPct, liveBaseline, liveLast, holds: growthPct < growthLimitPct };
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
      ],
      rows.map((row) => [
        row.component,
        fmt(row.baseline, 1),
        fmt(row.last, 1),
        fmt(row.max, 1),
        `${fmt(row.growthPct, 1)} %`,
        row.holds ? '✓' : '✗',
        `${fmt(row.liveBaseline, 1)} → ${fmt(row.liveLast, 1)} MB`,
      ]),
    );
    const checks = table(
      ['', 'invariant (whole run)', 'detail'],
      invariants.map((result) => [result.holds ? '✓' : '✗', result.name, result.detail]),
      3,
    );
    const passed = rows.every((row) => row.holds) && invariants.every((result) => result.holds);
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
        `bench:soak ${passed ? 'PASSED' : 'FAILED'} in ${Math.round((performance.now() - started) / 1000)} s (mesh start included)`,
      ].join('\n'),
    );
    return passed ? 0 : 1;
  } finally {
    await world.stop();
  }
});
