import { errorMessage, type Logger } from './log.js';
import type { BackgroundTask } from './service.js';
import { withTimeout } from './timing.js';

/** Each wait is `everyMs` ± this share, so replicas started together do not run in step. */
const jitterShare = 0.1;
/** How long stop waits for a run in flight. */
const stopTimeoutMs = 15_000;

export interface PeriodicOptions {
  /** Names the task in the log line of a failed run. */
  name: string;
  everyMs: number;
  /** The first run, after this long (default: one period). */
  firstRunAfterMs?: number;
  run(): Promise<void>;
  log: Logger;
  /** The random source of the jitter (tests pin it). */
  random?: () => number;
}

/**
 * The one shape of a housekeeping loop: runs `run` every `everyMs` (jittered), never twice at
 * once (a run still going when the next is due skips that turn), a failed run is logged and the
 * next one tries again. Returned as a background task, so the service's graceful stop ends it
 * and waits for the run in flight.
 */
export function startPeriodic(options: PeriodicOptions): BackgroundTask {
  // A period of 0 would be a loop of back-to-back runs, not housekeeping.
  if (!(options.everyMs >= 1)) throw new Error(`${options.name}: the period must be at least 1 ms, got ${options.everyMs}`);
  const random = options.random ?? Math.random;
  let running: Promise<void> | undefined;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const schedule = (ms: number) => {
    if (stopped) return;
    timer = setTimeout(tick, Math.max(0, Math.round(ms * (1 + jitterShare * (2 * random() - 1)))));
    timer.unref();
  };
  const tick = () => {
    // Promise.resolve().then: a run that throws before returning its promise fails like one that rejects.
    running ??= Promise.resolve()
      .then(options.run)
      .catch((err: unknown) => options.log.warn({ err: errorMessage(err), task: options.name }, `${options.name} failed; retrying at the next run`))
      .finally(() => {
        running = undefined;
      });
    schedule(options.everyMs);
  };
  schedule(options.firstRunAfterMs ?? options.everyMs);

  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      // A hung run (a dependency that never answers) must not hold the service's shutdown.
      if (running)
        await withTimeout(running, stopTimeoutMs, `${options.name} stopping`).catch((err: unknown) =>
          options.log.warn({ err: errorMessage(err) }, `${options.name} still running at stop`),
        );
    },
  };
}
