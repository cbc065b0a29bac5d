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
import path from 'node:path';
import { checkInvariants } from '@switchboard/testkit/chaos/invariants';
import { defaultLoadOptions, MixedLoad, prepareAccount } from '@switchboard/testkit/chaos/mixed-load';
import { startChaosWorld } from '@switchboard/testkit/chaos/world';
import { sleep } from './measure/loop.js';
import { runBench, writeResultFile } from './report.js';
import { growthRows } from './soak/growth.js';
import { soakTables } from './soak/printout.js';
import { type Sample, sampleMemory } from './soak/samples.js';
import { minutes, ratePerSecond, sampleSeconds, warmupMinutes } from './soak/settings.js';

/** The mixed load for `minutes`, memory sampled every `sampleSeconds` (and at both ends), then the invariants of the run. */
async function soak(world: Awaited<ReturnType<typeof startChaosWorld>>) {
  const account = await prepareAccount(world.mesh.gatewayUrl, world.webhookUrl);
  const load = new MixedLoad(world.mesh, account, { ...defaultLoadOptions, ratePerSecond });
  const samples: Sample[] = [];
  const sample = async () => {
    samples.push(await sampleMemory(world.mesh, (Date.now() - load.startedAt) / 1000));
  };
  load.start();
  await sample();
  const sampler = setInterval(() => void sample(), sampleSeconds * 1000);
  await sleep(minutes * 60_000);
  clearInterval(sampler);
  await sample();
  await load.stop();
  const invariants = await checkInvariants(world, load, account, { retriedAppendsMayRepeat: false, settleMs: 30_000 });
  return { samples, invariants, attempts: load.attempts.length };
}

runBench(async () => {
  const started = performance.now();
  const world = await startChaosWorld({
    onComponentExit: (component, code, lastLines) => console.error(`${component} exited on its own (${code}):\n${lastLines.join('\n')}`),
  });
  try {
    const { samples, invariants, attempts } = await soak(world);
    const rows = growthRows(samples);
    const passed = rows.every((row) => row.holds) && invariants.every((result) => result.holds);
    const file = await writeResultFile('soak', new Date().toISOString(), { minutes, warmupMinutes, sampleSeconds, rows, invariants, samples });
    console.log(
      [
        `Soak: ${minutes} min of mixed load at ${ratePerSecond} operations/s (${attempts} attempts), RSS sampled every ${sampleSeconds} s`,
        '',
        ...soakTables(samples, rows, invariants),
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
