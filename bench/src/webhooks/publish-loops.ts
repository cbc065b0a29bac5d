import { ConnectError } from '@connectrpc/connect';
import { type Latency, latencyOf } from '../measure/latency.js';
import { closedLoop } from '../measure/loop.js';
import type { Arrivals } from './receiver.js';

export interface PublishRun {
  ok: number;
  errors: number;
  firstProblem?: string;
  /** performance.now() of each publish's start, by sequence. */
  starts: Float64Array;
  /** Publish call → answer, ms, of the calls that succeeded. */
  answerLatencies: number[];
  firstStartAt: number;
  lastAnswerAt: number;
}

export type Publish = (phase: string, seq: number) => Promise<unknown>;

/** `count` publishes, `inFlight` at a time, each starting when another answered. */
export async function publishClosedLoop(publish: Publish, phase: string, count: number, inFlight: number): Promise<PublishRun> {
  const run: PublishRun = { ok: 0, errors: 0, starts: new Float64Array(count), answerLatencies: [], firstStartAt: performance.now(), lastAnswerAt: 0 };
  await closedLoop(inFlight, { maxCalls: count }, async (seq) => {
    const started = performance.now();
    run.starts[seq] = started;
    try {
      await publish(phase, seq);
      run.ok += 1;
      run.answerLatencies.push(performance.now() - started);
    } catch (err) {
      run.errors += 1;
      run.firstProblem ??= ConnectError.from(err).message;
    }
    run.lastAnswerAt = performance.now();
  });
  return run;
}

/** `count` publishes, one every 1000/`rate` ms from now, each started at its time whatever the others do. */
export async function openLoop(publish: Publish, phase: string, count: number, rate: number): Promise<PublishRun & { maxLagMs: number; peakInFlight: number }> {
  const run = { ok: 0, errors: 0, starts: new Float64Array(count), answerLatencies: [] as number[], lastAnswerAt: 0, maxLagMs: 0, peakInFlight: 0 };
  const interval = 1000 / rate;
  const t0 = performance.now() + 20;
  const pending: Promise<void>[] = [];
  let inFlight = 0;
  let firstProblem: string | undefined;
  const fire = (seq: number) => {
    const started = performance.now();
    run.starts[seq] = started;
    run.maxLagMs = Math.max(run.maxLagMs, started - (t0 + seq * interval));
    inFlight += 1;
    run.peakInFlight = Math.max(run.peakInFlight, inFlight);
    pending.push(
      publish(phase, seq)
        .then(
          () => {
            run.ok += 1;
            run.answerLatencies.push(performance.now() - started);
          },
          (err: unknown) => {
            run.errors += 1;
            firstProblem ??= ConnectError.from(err).message;
          },
        )
        .finally(() => {
          inFlight -= 1;
          run.lastAnswerAt = performance.now();
        }),
    );
  };
  let seq = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (seq < count && t0 + seq * interval <= now) fire(seq++);
      if (seq >= count) return resolve();
      setTimeout(tick, Math.max(0, t0 + seq * interval - performance.now()));
    };
    setTimeout(tick, Math.max(0, t0 - performance.now()));
  });
  await Promise.all(pending);
  return { ...run, firstStartAt: t0, firstProblem };
}

/** Publish start → arrival at the receiver, of the events that arrived. */
export function receiptLatency(run: PublishRun, arrivals: Arrivals): Latency {
  const values: number[] = [];
  for (let seq = 0; seq < arrivals.at.length; seq++) if (arrivals.at[seq] > 0 && run.starts[seq] > 0) values.push(arrivals.at[seq] - run.starts[seq]);
  return latencyOf(values);
}
