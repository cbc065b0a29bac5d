import { components } from '@switchboard/runtime/dev/mesh';
import { type Fault, type FaultRow, formatChaosReport, runFault } from './faults.js';
import { checkInvariants, type InvariantResult } from './invariants.js';
import { defaultLoadOptions, type LoadOptions, MixedLoad, prepareAccount } from './mixed-load.js';
import type { ChaosWorld } from './world.js';

export interface ChaosPlan {
  faults: Fault[];
  /** How long each fault keeps its target away under load. */
  downMs: number;
  /** Steady load before the first fault, and between faults. */
  steadyMs: number;
  load?: Partial<LoadOptions>;
  /** See InvariantOptions: true when a fault kills processes. */
  retriedAppendsMayRepeat: boolean;
}

export interface ChaosResult {
  rows: FaultRow[];
  invariants: InvariantResult[];
  /** Whether every fault row and every invariant held. */
  passed: boolean;
  report: string;
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs the mixed load on `world`, injects the plan's faults one after another, then checks the invariants. */
export async function runChaos(world: ChaosWorld, plan: ChaosPlan): Promise<ChaosResult> {
  const account = await prepareAccount(world.mesh.gatewayUrl, world.webhookUrl);
  const load = new MixedLoad(world.mesh, account, { ...defaultLoadOptions, ...plan.load });
  const loadStartedAt = Date.now();
  load.start();
  const rows: FaultRow[] = [];
  try {
    await pause(plan.steadyMs);
    for (const fault of plan.faults) {
      rows.push(await runFault(world, load, fault, plan.downMs, loadStartedAt));
      await pause(plan.steadyMs);
    }
  } finally {
    await load.stop();
  }
  const invariants = await checkInvariants(world, load, account, { retriedAppendsMayRepeat: plan.retriedAppendsMayRepeat, settleMs: 30_000 });
  const passed = rows.every((row) => row.holds) && invariants.every((result) => result.holds);
  const errorLines = Object.fromEntries(components.map((component) => [component, loggedErrors(world.mesh.output(component))]));
  return { rows, invariants, passed, report: formatChaosReport(rows, invariants, load.attempts, errorLines) };
}

/** The lines a component logged at level error (50) or fatal (60): for the report, to tell why something failed. */
function loggedErrors(output: string): string[] {
  return output.split('\n').filter((line) => /^\{"level":(50|60),/.test(line));
}
