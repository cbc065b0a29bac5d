import { briefMoneyChaosPlan, type MoneyChaosWorld, runMoneyChaos, startMoneyChaosWorld } from '@switchboard/testkit/chaos/money-run';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The money path's short chaos run (docs/money-path.md#faults; issue 23), the brief form of the
 * money-path scenario of `npm run bench:chaos` (testkit/src/chaos/money-run.ts): a private
 * Postgres and nats-server with the mesh on them, a small load of chat completions (streamed and
 * not) from accounts whose budgets run out during the run — two keys with caps, a workspace's
 * prepaid balance — and, under that load: the data plane killed with SIGKILL mid-stream,
 * nats-server killed and restarted, billing killed, keys restarted. Afterwards no usage is lost,
 * none is counted twice, no cap is passed, no balance goes below zero, every key's spend is in
 * step, the leases the killed data plane held came back after LEASE_TTL (half of it the
 * holder's deadline, the other half for its usage to settle), and the budgets were used up.
 */

let world: MoneyChaosWorld;

beforeAll(async () => {
  world = await startMoneyChaosWorld();
});

afterAll(async () => {
  await world?.stop();
});

describe('chaos: the money path under kill -9, NATS and service restarts', () => {
  it('loses no usage, counts none twice, passes no cap, overdraws no balance, and a killed replica’s leases come back', async () => {
    const result = await runMoneyChaos(world, briefMoneyChaosPlan);
    console.log(result.report);
    expect(result.rows).toHaveLength(4);
    expect(
      [...result.rows.filter((row) => !row.holds).map((row) => row.fault), ...result.invariants.filter((invariant) => !invariant.holds).map((i) => i.name)],
      result.report,
    ).toEqual([]);
    expect(result.invariants).toHaveLength(7);
  }, 300_000);
});
