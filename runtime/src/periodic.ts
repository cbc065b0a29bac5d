import type { Logger } from './log.js';
import type { BackgroundTask } from './service.js';

/** Each wait is `everyMs` ± this share, so replicas started together do not run in step. */
const jitterShare = 0.1;

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
    running ??= options
      .run()
      .catch((err: Error) => options.log.warn({ err: err.message, task: options.name }, `${options.name} failed; retrying at the next run`))
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
      await running;
    },
  };
}
