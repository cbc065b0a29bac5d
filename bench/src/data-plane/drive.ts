import { Money } from '@switchboard/runtime/money';
import { latencyOf, round } from '../measure/latency.js';
import { sumCounts } from '../measure/load.js';
import { closedLoop, sleep } from '../measure/loop.js';
import { type CpuUse, cpuMeter, cpuMicrosPer, weightedCpu } from '../measure/proc.js';
import type { Outcome } from './requests.js';
import { maxRequestsPerRun } from './settings.js';

/** Sums what the front door answered it cost, and counts the answers per tier. */
export class Ledger {
  private readonly costs = new Map<string, number>();
  readonly tiers: Record<string, number> = {};
  add(outcome: Outcome): void {
    if (outcome.costUsd !== undefined) this.costs.set(outcome.costUsd, (this.costs.get(outcome.costUsd) ?? 0) + 1);
    if (outcome.tier !== undefined) this.tiers[outcome.tier] = (this.tiers[outcome.tier] ?? 0) + 1;
  }
  total(): InstanceType<typeof Money> {
    let sum = new Money(0);
    for (const [cost, count] of this.costs) sum = sum.plus(new Money(cost).mul(count));
    return sum;
  }
}

export interface Run {
  variant: string;
  inFlight: number;
  seconds: number;
  ok: number;
  /** Answers that were not a complete 200, by HTTP status ("error" for a failed request). */
  failures: Record<string, number>;
  firstProblem?: string;
  latencies: number[];
  cpu: CpuUse;
}

export type Watch = () => Promise<Record<string, Array<number | undefined>>>;

/** One request or call: its status ("200", "error", an RPC's answer) and, once timed, whether it is what it should be. */
export type Call = () => Promise<{ status: string; inspect(): Outcome }>;

/** `inFlight` loops making `call` for `seconds` (each waiting `pauseMs` after an answer); latencies of the complete answers only. */
export async function drive(name: string, call: Call, ledger: Ledger, seconds: number, inFlight: number, watch?: Watch, pauseMs = 0): Promise<Run> {
  const latencies: number[] = [];
  const failures: Record<string, number> = {};
  let ok = 0;
  let firstProblem: string | undefined;
  const stopMeter = cpuMeter(watch ? await watch() : {});
  const elapsed = await closedLoop(inFlight, { maxCalls: maxRequestsPerRun, seconds }, async () => {
    const callStarted = performance.now();
    let outcome: Outcome;
    let status: string;
    try {
      const answer = await call();
      const took = performance.now() - callStarted;
      status = answer.status;
      outcome = answer.inspect();
      if (!outcome.problem) latencies.push(took);
    } catch (err) {
      outcome = { problem: (err as Error).message };
      status = 'error';
    }
    ledger.add(outcome);
    if (outcome.problem) {
      const key = status === '200' ? '200 incomplete' : status;
      failures[key] = (failures[key] ?? 0) + 1;
      firstProblem ??= `${name}: ${outcome.problem}`;
    } else ok += 1;
    if (pauseMs > 0) await sleep(pauseMs);
  });
  return { variant: name, inFlight, seconds: elapsed, ok, failures, firstProblem, latencies, cpu: stopMeter() };
}

export interface Summary {
  variant: string;
  inFlight: number;
  requests: number;
  seconds: number;
  perSecond: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  failures: Record<string, number>;
  failed: number;
  firstProblem?: string;
  cpu: CpuUse;
  /** CPU µs per complete answer, per process. */
  cpuMicrosPerRequest: Record<string, number>;
}

export function summarize(runs: Run[]): Summary {
  const ok = runs.reduce((sum, run) => sum + run.ok, 0);
  const seconds = runs.reduce((sum, run) => sum + run.seconds, 0);
  const failures = sumCounts(runs.map((run) => run.failures));
  const cpu = weightedCpu(runs);
  const perSecond = seconds > 0 ? ok / seconds : 0;
  return {
    variant: runs[0].variant,
    inFlight: runs[0].inFlight,
    requests: ok,
    seconds: round(seconds),
    perSecond: Math.round(perSecond),
    latencyMs: latencyOf(runs.flatMap((run) => run.latencies)),
    failures,
    failed: Object.values(failures).reduce((sum, count) => sum + count, 0),
    firstProblem: runs.find((run) => run.firstProblem)?.firstProblem,
    cpu,
    cpuMicrosPerRequest: Object.fromEntries(Object.entries(cpu.processes).map(([name, percent]) => [name, cpuMicrosPer(percent, perSecond) ?? 0])),
  };
}
