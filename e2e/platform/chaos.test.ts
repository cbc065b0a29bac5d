import { killComponent } from '@switchboard/testkit/chaos/faults';
import { runChaos } from '@switchboard/testkit/chaos/run';
import { type ChaosWorld, startChaosWorld } from '@switchboard/testkit/chaos/world';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The short chaos run (the long one is `npm run bench:chaos`): a private Postgres and nats-server,
 * the mesh on them, a steady mixed load (sign-ins, key checks that record usage, appends,
 * agent.completed events to a webhook receiver), and billing killed with SIGKILL in the middle
 * of it, then restarted. Every request must end in a success or a clean 503 + Retry-After (the
 * load retries those), billing must be back in use within 10 s, and afterwards every
 * acknowledged usage is charged once with the balance in step, the key's spend has every usage
 * event, every acknowledged append is stored and every acknowledged event delivered once.
 */

let world: ChaosWorld;

beforeAll(async () => {
  world = await startChaosWorld();
});

afterAll(async () => {
  await world?.stop();
});

describe('chaos: kill -9 of a service under load', () => {
  it('loses no request, usage, event or delivery, charges nothing twice, and recovers within 10 s', async () => {
    const billingPid = world.mesh.pid('billing');
    const result = await runChaos(world, {
      faults: [killComponent('billing')],
      downMs: 2_000,
      steadyMs: 3_000,
      load: { ratePerSecond: 30 },
      retriedAppendsMayRepeat: true,
    });
    console.log(result.report);
    expect(world.mesh.pid('billing')).not.toBe(billingPid);
    expect(
      result.rows.map((row) => ({ fault: row.fault, holds: row.holds })),
      result.report,
    ).toEqual([{ fault: 'kill -9 billing', holds: true }]);
    expect(
      result.invariants.filter((invariant) => !invariant.holds),
      result.report,
    ).toEqual([]);
    expect(result.invariants.length).toBeGreaterThanOrEqual(8);
  }, 120_000);
});
