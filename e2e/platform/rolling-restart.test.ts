import { components } from '@switchboard/runtime/dev/mesh';
import { restartComponent } from '@switchboard/testkit/chaos/faults';
import { runChaos } from '@switchboard/testkit/chaos/run';
import { type ChaosWorld, startChaosWorld } from '@switchboard/testkit/chaos/world';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * A rolling restart under load loses no request and no event. One instance per component, so
 * "rolling" is: each service and the data plane in turn gets SIGTERM (its graceful shutdown:
 * unready, drain, exit 0) and a new process on the same port, while the mixed load of the chaos
 * harness runs (sign-ins, key checks that record usage, appends, agent.completed events).
 * Asserted: every attempt is answered with a success or a clean 503 + Retry-After (or a refused
 * connection, nothing sent) within its 10 s deadline, never a reset, a hang or another error;
 * every operation is acknowledged after retries; every acknowledged usage is charged exactly once
 * (balance = opening credit − Σ usage); the key's spend has every usage event; every acknowledged
 * append is stored exactly once (a graceful stop finishes what it started, so a retried append
 * was never stored before); every acknowledged event is delivered once; no outbox keeps an
 * event; and each component is back in use within 10 s of its restart. The gateway is not
 * restarted here: with a single instance its clients' connections are what goes (its own
 * shutdown is graceful-shutdown.test.ts).
 */

let world: ChaosWorld;

beforeAll(async () => {
  world = await startChaosWorld();
});

afterAll(async () => {
  await world?.stop();
});

describe('a rolling restart under load', () => {
  it('answers every request cleanly and loses no request, write, usage or event', async () => {
    const restarted = components.filter((component) => component !== 'gateway');
    const result = await runChaos(world, {
      faults: restarted.map(restartComponent),
      downMs: 0,
      steadyMs: 1_500,
      load: { ratePerSecond: 30 },
      retriedAppendsMayRepeat: false,
    });
    console.log(result.report);
    expect(
      result.rows.filter((row) => !row.holds),
      result.report,
    ).toEqual([]);
    expect(result.rows.map((row) => row.fault)).toEqual(restarted.map((component) => `restart ${component} (SIGTERM)`));
    expect(
      result.invariants.filter((invariant) => !invariant.holds),
      result.report,
    ).toEqual([]);
  }, 150_000);
});
