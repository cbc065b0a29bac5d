/**
 * A closed loop: `inFlight` workers, each starting its next call when its last one ended, until
 * `maxCalls` calls were started or `seconds` passed (loops are bounded in count as well as time).
 * `call` gets the call's sequence number and its worker's index, and handles its own failures.
 * Resolves with the seconds the loop took.
 */
export async function closedLoop(
  inFlight: number,
  limits: { maxCalls: number; seconds?: number },
  call: (seq: number, worker: number) => Promise<void>,
): Promise<number> {
  let issued = 0;
  const started = performance.now();
  const deadline = limits.seconds === undefined ? Number.POSITIVE_INFINITY : started + limits.seconds * 1000;
  const worker = async (w: number) => {
    while (issued < limits.maxCalls && performance.now() < deadline) await call(issued++, w);
  };
  await Promise.all(Array.from({ length: inFlight }, (_, w) => worker(w)));
  return (performance.now() - started) / 1000;
}

/** What a loop of calls got: the expected answers with their latencies, wrong answers, errors, and the first problem. */
export class Tally {
  ok = 0;
  failed = 0;
  errors = 0;
  readonly latencies: number[] = [];
  firstProblem?: string;

  pass(latencyMs: number): void {
    this.latencies.push(latencyMs);
    this.ok += 1;
  }

  wrong(problem: string): void {
    this.failed += 1;
    this.firstProblem ??= problem;
  }

  error(problem: string): void {
    this.errors += 1;
    this.firstProblem ??= problem;
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Reads `read` every `intervalMs` until `done` says so: the time (performance.now()) of the read
 * that did. What is awaited may come slowly (a backlog being worked off), so what fails is a
 * value that stopped moving: an error (`describe` of the last value and how long it stood still)
 * when it did not change for `stallTimeoutMs`, or at `deadline` (performance.now()).
 */
export async function pollUntil<T extends string | number>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  settings: { intervalMs: number; stallTimeoutMs: number; deadline: number },
  describe: (value: T, stillMs: number) => string,
): Promise<number> {
  let last: T | undefined;
  let movedAt = performance.now();
  for (;;) {
    const value = await read();
    const seenAt = performance.now();
    if (done(value)) return seenAt;
    if (value !== last) movedAt = seenAt;
    last = value;
    if (seenAt - movedAt > settings.stallTimeoutMs || seenAt > settings.deadline) throw new Error(describe(value, Math.round(seenAt - movedAt)));
    await sleep(settings.intervalMs);
  }
}
