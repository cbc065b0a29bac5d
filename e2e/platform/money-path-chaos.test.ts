import { Money } from '@switchboard/runtime/money';
import { eventually } from '@switchboard/runtime/testing';
import { killComponent, restartComponent, restartNats } from '@switchboard/testkit/chaos/faults';
import type { InvariantResult } from '@switchboard/testkit/chaos/invariants';
import { chaosModel } from '@switchboard/testkit/chaos/mixed-load';
import {
  checkMoneyInvariants,
  defaultMoneyLoadOptions,
  MoneyLoad,
  moneyRequestBody,
  prepareMoneyAccounts,
  sendCompletion,
} from '@switchboard/testkit/chaos/money-path';
import { type ChaosWorld, startChaosWorld } from '@switchboard/testkit/chaos/world';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The money path's short chaos run (docs/money-path.md#faults; issue 23): a private Postgres and
 * nats-server with the mesh on them, a small load of chat completions (streamed and not) from
 * accounts whose budgets run out during the run — two keys with caps, a workspace's prepaid
 * balance — and, under that load: the data plane killed with SIGKILL mid-stream, nats-server
 * killed and restarted, billing killed, keys restarted. Afterwards no usage is lost, none is
 * counted twice, no cap is passed, no balance goes below zero, every key's spend is in step, and
 * the leases the killed data plane held came back after LEASE_TTL (half of it the holder's
 * deadline, the other half for its usage to settle).
 */

/**
 * A lease not renewed within this stops holding its budget; its holder stops using it at half
 * of it (docs/money-path.md#leases). Short, so that a killed replica's leases come back within
 * the run.
 */
const leaseTtlMs = 5000;
/** Every workspace's credit: small, so that a balance runs out under the load. */
const openingCreditUsd = '0.01';
const steadyMs = 2000;
const downMs = 1500;

let world: ChaosWorld;

beforeAll(async () => {
  world = await startChaosWorld({ env: { LEASE_TTL: `${leaseTtlMs}ms` }, openingCreditUsd });
  // Answers of 50 tokens; a stream sends one every 20 ms, so one is under way for a second.
  world.upstream.words = 50;
  world.upstream.mode(chaosModel, { kind: 'slow', delayMs: 20 });
});

afterAll(async () => {
  await world?.stop();
});

/** The estimate a request of the load reserves (docs/money-path.md#leases): its body's bytes and max_tokens at the catalog's prices, with the largest markup. */
function estimateOf(maxTokens: number, stream: boolean): Money {
  const bytes = Buffer.byteLength(moneyRequestBody(maxTokens, stream));
  // The chaos catalog's model: 1.00 input / 2.00 output per 1M; the largest passthrough markup of the pricing file is 5 %.
  return new Money(bytes).mul('1.00').plus(new Money(maxTokens).mul('2.00')).mul('1.05').div(1_000_000);
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('chaos: the money path under kill -9, NATS and service restarts', () => {
  it('loses no usage, counts none twice, passes no cap, overdraws no balance, and a killed replica’s leases come back', async () => {
    const { maxTokens } = defaultMoneyLoadOptions;
    const streamEstimate = estimateOf(maxTokens, true);
    const accounts = await prepareMoneyAccounts(world.mesh.gatewayUrl, [
      { label: 'cap-low', capUsd: '0.002' },
      { label: 'cap', capUsd: '0.005' },
      { label: 'balance' },
      // Room for one stream (1.5 estimates): the lease the killed data plane held is all of it.
      { label: 'lease', capUsd: streamEstimate.mul('1.5').toDecimalPlaces(12, Money.ROUND_DOWN).toFixed(), workers: 0 },
    ]);
    const lease = accounts.find((account) => account.label === 'lease')!;
    const budgets = accounts.filter((account) => account.label !== 'lease');
    const load = new MoneyLoad(world.mesh.gatewayUrl, accounts);
    const cutWindows: Array<[number, number]> = [];
    const faults: string[] = [];
    load.start();
    try {
      await pause(steadyMs);

      // 1. kill -9 the data plane mid-stream: the load's streams, and one of the lease account holding its whole cap.
      await eventually(() => load.streamsInFlight > 0, 'a stream of the load under way');
      const sentAt = Date.now();
      const response = await fetch(`${world.mesh.gatewayUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${lease.fullKey}`, 'content-type': 'application/json' },
        body: moneyRequestBody(maxTokens, true),
      });
      expect(response.status).toBe(200);
      const reader = response.body!.getReader();
      expect((await reader.read()).done).toBe(false);
      const killedAt = Date.now();
      await killComponent('data-plane').inject(world);
      let streamEnd = '';
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          streamEnd = Buffer.from(value).toString('utf8');
        }
      } catch {
        // cut: the end never came
      }
      expect(streamEnd.includes('[DONE]'), 'the killed stream ended in full').toBe(false);
      load.record({
        account: lease.label,
        stream: true,
        at: sentAt,
        ms: Date.now() - sentAt,
        outcome: 'cut',
        generationId: response.headers.get('x-service-generation-id') ?? undefined,
      });
      await killComponent('data-plane').restore(world);
      const restoredAt = Date.now();
      cutWindows.push([killedAt, restoredAt]);
      faults.push(`kill -9 data-plane (back after ${restoredAt - killedAt} ms)`);

      // Its leases come back after LEASE_TTL: the lease account's cap, all held by the dead replica, serves again.
      let refusedMeanwhile = 0;
      const servedAt = await eventually(
        async () => {
          const at = Date.now();
          const result = await sendCompletion(world.mesh.gatewayUrl, lease.fullKey, { maxTokens, stream: false }, 10_000);
          load.record({ account: lease.label, at, ms: Date.now() - at, ...result });
          if (result.outcome === 'refused') refusedMeanwhile++;
          if (result.outcome === 'bad') throw new Error(`lease account: ${result.code} ${result.detail}`);
          return result.outcome === 'ok' && Date.now();
        },
        "the killed replica's lease to come back",
        leaseTtlMs + 15_000,
        100,
      );
      const leaseBackMs = servedAt - Math.max(restoredAt, killedAt + leaseTtlMs);
      faults.push(`lease back ${servedAt - killedAt} ms after the kill (${refusedMeanwhile} refusals meanwhile)`);
      expect(leaseBackMs, 'the lease account served within 2 s of LEASE_TTL after the kill (or of the restart)').toBeLessThan(2000);

      await pause(steadyMs);
      // 2. NATS killed and started again.
      await restartNats.inject(world);
      await pause(downMs);
      await restartNats.restore(world);
      faults.push(restartNats.name);
      await pause(steadyMs);
      // 3. billing killed under load, started again.
      await killComponent('billing').inject(world);
      await pause(downMs);
      await killComponent('billing').restore(world);
      faults.push('kill -9 billing');
      await pause(steadyMs);
      // 4. keys restarted (SIGTERM, a new process).
      await restartComponent('keys').inject(world);
      await pause(downMs);
      await restartComponent('keys').restore(world);
      faults.push('restart keys (SIGTERM)');

      // Then the load goes on until every budget has run out (refused after the faults), so the caps and the balance were reached.
      const faultsDoneAt = Date.now();
      await eventually(() => budgets.every((account) => load.refusals(account, faultsDoneAt) > 0), 'every budget to run out', 90_000, 250);
    } finally {
      await load.stop();
    }

    const invariants: InvariantResult[] = await checkMoneyInvariants(world, load, { openingCreditUsd, settleMs: 30_000, cutWindows });
    const report = [
      `faults: ${faults.join('; ')}`,
      ...invariants.map((invariant) => `${invariant.holds ? '✓' : '✗'} ${invariant.name}: ${invariant.detail}`),
    ].join('\n');
    console.log(report);
    expect(
      invariants.filter((invariant) => !invariant.holds),
      report,
    ).toEqual([]);
    expect(invariants.length).toBe(5);

    // The budgets were used up, not lost to leases that never came back: what is left of each is less than
    // the estimates its requests in flight could hold when it was refused, and one more.
    const db = new pg.Client({ connectionString: world.postgres.url });
    await db.connect();
    try {
      for (const account of budgets) {
        const { rows } = await db.query<{ spent: string; balance: string }>(
          `SELECT (SELECT COALESCE(sum(cost_usd), 0)::text FROM billing.usage_records WHERE key_id = $1) AS spent,
                  (SELECT balance_usd::text FROM billing.accounts WHERE workspace_id = $2) AS balance`,
          [account.keyId, account.workspaceId],
        );
        const left = account.capUsd ? new Money(account.capUsd).minus(rows[0].spent) : new Money(rows[0].balance);
        const bound = streamEstimate.mul(defaultMoneyLoadOptions.workersPerAccount + 1);
        expect(left.lt(bound), `${account.label}: ${left.toFixed()} left, more than ${bound.toFixed()}\n${report}`).toBe(true);
      }
    } finally {
      await db.end();
    }
  }, 300_000);
});
