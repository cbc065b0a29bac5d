import type { InsertLoopResult } from '../measure/inserts.js';
import { insertLoop } from '../measure/inserts.js';
import { latencyOf, round } from '../measure/latency.js';
import type { CpuUse } from '../measure/proc.js';
import type { BenchSession } from '../measure/session.js';
import { check, machineFacts } from '../report.js';
import { durationSeconds, warmupSeconds } from '../scenarios.js';
import type { EndToEnd } from './end-to-end.js';
import { callTimeoutMs, concurrency, minRatio, usageShape, workspaces } from './settings.js';

/** CPU milliseconds a process spent per usage over a phase. */
const msPerUsage = (cpu: CpuUse, name: string, seconds: number, usages: number) =>
  cpu.processes[name] === undefined || usages === 0 ? undefined : round(((cpu.processes[name] / 100) * seconds * 1000) / usages, 3);

/** The JSON report of bench:billing (docs/operations.md), its target and the errors found. */
export function billingResults(
  session: BenchSession,
  measured: { e2e: EndToEnd; inserts: InsertLoopResult; warmUsages: number; meshStartSeconds: number; natsSetup: string; errors: string[] },
) {
  const { e2e, inserts, errors } = measured;
  const { run, callSeconds, visibleAt } = e2e;
  const endToEndSeconds = visibleAt === undefined ? undefined : (visibleAt - run.firstCallAt) / 1000;
  const callsPerSecond = callSeconds > 0 ? Math.round(run.ok / callSeconds) : 0;
  const endToEndPerSecond = endToEndSeconds ? Math.round(run.ok / endToEndSeconds) : 0;
  const ratio = inserts.insertsPerSecond > 0 ? round(endToEndPerSecond / inserts.insertsPerSecond, 3) : 0;
  const callsRatio = inserts.insertsPerSecond > 0 ? round(callsPerSecond / inserts.insertsPerSecond, 3) : 0;
  const targets = [check('end-to-end usages/s ÷ raw Postgres inserts/s', ratio, '>=', minRatio, 'ratio')];
  const perUsage = (cpu: CpuUse, seconds: number) => Object.fromEntries(Object.keys(e2e.watch).map((name) => [name, msPerUsage(cpu, name, seconds, run.ok)]));
  return {
    at: session.at,
    machine: machineFacts(session.loadAverageAtStart),
    settings: {
      concurrency,
      workspaces,
      durationSeconds,
      warmupSeconds,
      callTimeoutMs,
      usage: { ...usageShape, inputTokens: 1000, outputTokens: 500 },
      nats: measured.natsSetup,
      insertLoop,
    },
    meshStartSeconds: measured.meshStartSeconds,
    warmUp: { usages: measured.warmUsages },
    recordUsage: {
      usages: run.ok,
      failed: run.failed,
      errors: run.errors,
      callSeconds: round(callSeconds),
      callsPerSecond,
      latencyMs: latencyOf(run.latencies),
      cpu: e2e.callsCpu,
      cpuMsPerUsage: perUsage(e2e.callsCpu, callSeconds),
    },
    backlogAtLastAnswer: e2e.backlog,
    endToEnd: {
      seconds: endToEndSeconds === undefined ? undefined : round(endToEndSeconds),
      usagesPerSecond: endToEndPerSecond,
      /** From the last answer to the last key's spend seen complete. */
      lagAfterLastAnswerMs: visibleAt === undefined ? undefined : Math.round(visibleAt - run.lastAnswerAt),
      cpu: e2e.endToEndCpu,
      cpuMsPerUsage: endToEndSeconds === undefined ? undefined : perUsage(e2e.endToEndCpu, endToEndSeconds),
    },
    postgresInserts: inserts,
    ratio,
    callsRatio,
    targets,
    errors,
    totalSeconds: 0,
  };
}

export type BillingReport = ReturnType<typeof billingResults>;
