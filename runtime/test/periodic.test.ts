import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../src/log.js';
import { startPeriodic } from '../src/periodic.js';

const log = createLogger('periodic-test', 'silent');

describe('startPeriodic', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('runs every period within its jitter, never twice at once, and a failed run does not stop it', async () => {
    let runs = 0;
    let release: () => void = () => undefined;
    const task = startPeriodic({
      name: 'test',
      everyMs: 1000,
      log,
      random: () => 1, // the longest wait: 1100 ms
      run: () => {
        runs++;
        if (runs === 1) return Promise.reject(new Error('boom'));
        return new Promise<void>((resolve) => (release = resolve));
      },
    });
    await vi.advanceTimersByTimeAsync(1099);
    expect(runs).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(runs).toBe(1);
    await vi.advanceTimersByTimeAsync(1100);
    expect(runs).toBe(2);
    // The second run is still going: the next turns are skipped.
    await vi.advanceTimersByTimeAsync(3300);
    expect(runs).toBe(2);
    release();
    await vi.advanceTimersByTimeAsync(1100);
    expect(runs).toBe(3);
    release();
    await task.stop();
  });

  it('stop waits for the run in flight and no run starts after it', async () => {
    let finished = false;
    let runs = 0;
    const task = startPeriodic({
      name: 'test',
      everyMs: 1000,
      firstRunAfterMs: 0,
      log,
      random: () => 0.5,
      run: async () => {
        runs++;
        await new Promise((resolve) => setTimeout(resolve, 500));
        finished = true;
      },
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(runs).toBe(1);
    const stopped = task.stop();
    await vi.advanceTimersByTimeAsync(500);
    await stopped;
    expect(finished).toBe(true);
    await vi.advanceTimersByTimeAsync(5000);
    expect(runs).toBe(1);
  });
});
