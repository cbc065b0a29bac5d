import { components } from '@switchboard/runtime/dev/mesh';
import { killComponent, restartNats, restartPostgres } from '@switchboard/testkit/chaos/faults';
import { runChaos } from '@switchboard/testkit/chaos/run';
import { startChaosWorld } from '@switchboard/testkit/chaos/world';
import { downSeconds, ratePerSecond, steadySeconds } from './settings.js';
import { type ScenarioResult, withWorld } from './world.js';

/**
 * The mixed scenario (testkit/src/chaos/run.ts): sign-ins, key checks that record usage,
 * conversation appends and agent.completed events, under kill -9 of every service but the
 * gateway and of the data plane, then of nats-server, then a stop of Postgres.
 */
export function mixedScenario(): Promise<ScenarioResult> {
  return withWorld('mixed', startChaosWorld, async (world) => {
    const result = await runChaos(world, {
      faults: [...components.filter((component) => component !== 'gateway').map(killComponent), restartNats, restartPostgres],
      downMs: downSeconds * 1000,
      steadyMs: steadySeconds * 1000,
      load: { ratePerSecond },
      retriedAppendsMayRepeat: true,
    });
    return { passed: result.passed, report: result.report, json: { rows: result.rows, invariants: result.invariants } };
  });
}
