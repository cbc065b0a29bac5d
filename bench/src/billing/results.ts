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

/**
 * A feed's figures: its answers (acks or RecordUsage's), settled by billing and end to end (keys
 * spend visible), each against the raw inserts, and the CPU of the answers and of the whole.
 */
function feedFigures(e2e: EndToEnd, watch: Record<string, unknown>, inserts: InsertLoopResult) {
  const { run, callSeconds } = e2e;
  const toInserts = (perSecond: number) => (inserts.insertsPerSecond > 0 ? round(perSecond / inserts.insertsPerSecond, 3) : 0);
  /** The measured usages over the seconds from the first send to `at` (performance.now()). */
  const rateTo = (at: number | undefined) => {
    const seconds = at === undefined ? undefined : (at - run.firstCallAt) / 1000;
    const usagesPerSecond = seconds ? Math.round(run.ok / seconds) : 0;
    return { seconds: seconds === undefined ? undefined : round(seconds), usagesPerSecond, ratio: toInserts(usagesPerSecond) };
  };
  const answeredPerSecond = callSeconds > 0 ? Math.round(run.ok / callSeconds) : 0;
  const perUsage = (cpu: CpuUse, seconds: number) => Object.fromEntries(Object.keys(watch).map((name) => [name, msPerUsage(cpu, name, seconds, run.ok)]));
  const endToEnd = rateTo(e2e.visibleAt);
  return {
    how: e2e.feed.how,
    answered: {
      usages: run.ok,
      failed: run.failed,
      errors: run.errors,
      seconds: round(callSeconds),
      perSecond: answeredPerSecond,
      ratio: toInserts(answeredPerSecond),
      latencyMs: latencyOf(run.latencies),
      cpu: e2e.callsCpu,
      cpuMsPerUsage: perUsage(e2e.callsCpu, callSeconds),
    },
    /** Usages sent before the run (warm-ups, earlier feeds): the backlog's rows count them too. */
    usagesBefore: e2e.usagesBefore,
    backlogAtLastAnswer: e2e.backlog,
    /** Until billing had every usage row (settled, debited, its event in the outbox). */
    settledByBilling: rateTo(e2e.settledAt),
    endToEnd: {
      ...endToEnd,
      /** From the last answer to the last key's spend seen complete. */
      lagAfterLastAnswerMs: e2e.visibleAt === undefined ? undefined : Math.round(e2e.visibleAt - run.lastAnswerAt),
      cpu: e2e.endToEndCpu,
      cpuMsPerUsage: endToEnd.seconds === undefined ? undefined : perUsage(e2e.endToEndCpu, endToEnd.seconds),
    },
  };
}

export type FeedFigures = ReturnType<typeof feedFigures>;

/** The JSON report of bench:billing (docs/operations.md), its target and the errors found. */
export function billingResults(
  session: BenchSession,
  measured: {
    runs: EndToEnd[];
    watch: Record<string, unknown>;
    inserts: InsertLoopResult;
    warmUsages: Record<string, number>;
    meshStartSeconds: number;
    natsSetup: string;
    errors: string[];
  },
) {
  const { runs, inserts, errors } = measured;
  const feeds = Object.fromEntries(runs.map((e2e) => [e2e.feed.key, feedFigures(e2e, measured.watch, inserts)]));
  const workStream = feeds.workStream;
  const targets = [check('work stream: end-to-end usages/s ÷ raw Postgres inserts/s', workStream.endToEnd.ratio, '>=', minRatio, 'ratio')];
  return {
    at: session.at,
    machine: machineFacts(session.loadAverageAtStart),
    settings: {
      concurrency,
      workspaces,
      durationSeconds,
      warmupSeconds,
      callTimeoutMs,
      usage: { ...usageShape, tier: 'fast', inputTokens: 1000, outputTokens: 500 },
      nats: measured.natsSetup,
      insertLoop,
    },
    meshStartSeconds: measured.meshStartSeconds,
    warmUp: { usages: measured.warmUsages },
    feeds,
    postgresInserts: inserts,
    targets,
    errors,
    totalSeconds: 0,
  };
}

export type BillingReport = ReturnType<typeof billingResults>;
