import { briefMoneyChaosPlan, runMoneyChaos, startMoneyChaosWorld } from '@switchboard/testkit/chaos/money-run';
import { downSeconds, steadySeconds } from './settings.js';
import { type ScenarioResult, withWorld } from './world.js';

/**
 * The money-path scenario (testkit/src/chaos/money-run.ts): chat completions, streamed and not,
 * from keys with caps and a workspace with a small balance, under kill -9 of the data plane
 * mid-stream with leases held, nats-server killed, billing killed, keys restarted. The budgets
 * grow with the faults' length, as many times as the e2e run's, so they run out across the
 * faults as there rather than before the second.
 */
export function moneyScenario(): Promise<ScenarioResult> {
  const plan = { steadyMs: steadySeconds * 1000, downMs: downSeconds * 1000 };
  const budgetScale = Math.max(1, (plan.steadyMs + plan.downMs) / (briefMoneyChaosPlan.steadyMs + briefMoneyChaosPlan.downMs));
  return withWorld(
    'money',
    (options) => startMoneyChaosWorld({ ...options, budgetScale }),
    async (world) => {
      const result = await runMoneyChaos(world, plan);
      const requests: Record<string, number> = {};
      for (const attempt of result.attempts) requests[attempt.outcome] = (requests[attempt.outcome] ?? 0) + 1;
      return {
        passed: result.passed,
        report: result.report,
        json: { leaseTtlMs: world.leaseTtlMs, budgets: world.budgets, requests, rows: result.rows, invariants: result.invariants },
      };
    },
  );
}
