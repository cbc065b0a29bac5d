import type { Component } from '@switchboard/runtime/dev/mesh';
import { table } from '../text-table.js';
import type { InvariantResult } from './invariants.js';
import { type Attempt, type MixedLoad, operationKinds, retryable } from './mixed-load.js';
import type { ChaosWorld } from './world.js';

/** A fault: takes something away, keeps it away for `downMs` under load, brings it back. */
export interface Fault {
  name: string;
  /** Resolves once the thing is away. */
  inject(world: ChaosWorld): Promise<void>;
  /** Resolves once it is back (started again; a component also reported ready by the gateway). */
  restore(world: ChaosWorld): Promise<void>;
}

export const killComponent = (component: Component): Fault => ({
  name: `kill -9 ${component}`,
  inject: (world) => world.mesh.killComponent(component),
  restore: (world) => world.mesh.startComponent(component),
});

/** A rolling restart's step: SIGTERM (the graceful shutdown, which must exit 0), then a new process on the same port. */
export const restartComponent = (component: Component): Fault => ({
  name: `restart ${component} (SIGTERM)`,
  async inject(world) {
    const exit = await world.mesh.stopComponent(component);
    if (exit?.code !== 0)
      throw new Error(`${component} exited ${JSON.stringify(exit)} on SIGTERM, not 0:\n${world.mesh.output(component).split('\n').slice(-20).join('\n')}`);
  },
  restore: (world) => world.mesh.startComponent(component),
});

export const restartNats: Fault = {
  name: 'kill -9 nats-server, restart',
  inject: (world) => world.nats.kill(),
  restore: (world) => world.nats.up(),
};

export const restartPostgres: Fault = {
  name: 'stop Postgres, restart',
  inject: (world) => world.postgres.down(),
  restore: (world) => world.postgres.up(),
};

/** A dependency is back within this, or the run fails. */
export const recoveryLimitMs = 10_000;

/** What one fault did to the load. */
export interface FaultRow {
  fault: string;
  /** Seconds into the load. */
  injectedAtS: number;
  /** Attempts in flight at the injection or sent after it, until recovery (or the recovery limit). */
  requests: number;
  /** Of them, clean retryable answers (503 + Retry-After, a refused connection, an internal call dropped by a killed process). */
  unavailable: number;
  /** Of them, anything else that failed (a hang, a reset, a 500…). */
  bad: number;
  maxLatencyMs: number;
  /** From the return (the restart) until every kind of operation has succeeded again; undefined if not within the limit. */
  recoveredInMs: number | undefined;
  holds: boolean;
}

/**
 * Injects `fault` under the running `load`, keeps it for `downMs`, restores it, and measures:
 * the attempts under way from the injection on, and the recovery (for each kind of operation, the end of
 * its first successful attempt sent after the return; the latest of those), waiting for it up to
 * the recovery limit.
 */
export async function runFault(world: ChaosWorld, load: MixedLoad, fault: Fault, downMs: number, loadStartedAt: number): Promise<FaultRow> {
  const injectedAt = Date.now();
  await fault.inject(world);
  await new Promise((resolve) => setTimeout(resolve, downMs));
  const returnedAt = Date.now();
  await fault.restore(world);
  const recoveredAt = await waitForRecovery(load, returnedAt);
  const windowEnd = recoveredAt ?? returnedAt + recoveryLimitMs;
  const window = load.attemptsBetween(injectedAt, windowEnd);
  const bad = window.filter((attempt) => attempt.outcome !== 'ok' && !retryable.has(attempt.outcome)).length;
  const recoveredInMs = recoveredAt === undefined ? undefined : recoveredAt - returnedAt;
  return {
    fault: fault.name,
    injectedAtS: (injectedAt - loadStartedAt) / 1000,
    requests: window.length,
    unavailable: window.filter((attempt) => retryable.has(attempt.outcome)).length,
    bad,
    maxLatencyMs: Math.max(0, ...window.map((attempt) => attempt.ms)),
    recoveredInMs,
    holds: bad === 0 && recoveredInMs !== undefined && recoveredInMs <= recoveryLimitMs,
  };
}

/** When every kind had a success sent after `returnedAt` (the latest end of those), or undefined past the limit. */
async function waitForRecovery(load: MixedLoad, returnedAt: number): Promise<number | undefined> {
  const deadline = returnedAt + recoveryLimitMs + 2_000;
  for (;;) {
    const firstOk = new Map<string, number>();
    for (const attempt of load.attempts) {
      if (attempt.at < returnedAt || attempt.outcome !== 'ok') continue;
      const end = attempt.at + attempt.ms;
      firstOk.set(attempt.kind, Math.min(firstOk.get(attempt.kind) ?? end, end));
    }
    if (firstOk.size === operationKinds.length) return Math.max(...firstOk.values());
    if (Date.now() > deadline) return undefined;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The faults injected and the invariants checked, as the bench and the test print them. */
export function formatChaosReport(rows: FaultRow[], invariants: InvariantResult[], attempts: Attempt[], errorLines: Record<string, string[]>): string {
  const mark = (holds: boolean) => (holds ? '✓' : '✗');
  const faults = table(
    ['fault', 'injected at', 'requests', '503s', 'bad', 'max latency', 'recovered in', 'invariants'],
    rows.map((row) => [
      row.fault,
      `${row.injectedAtS.toFixed(1)} s`,
      String(row.requests),
      String(row.unavailable),
      String(row.bad),
      `${row.maxLatencyMs} ms`,
      row.recoveredInMs === undefined ? `> ${recoveryLimitMs / 1000} s` : `${(row.recoveredInMs / 1000).toFixed(1)} s`,
      mark(row.holds),
    ]),
  );
  const checks = table(
    ['', 'invariant (whole run)', 'detail'],
    invariants.map((result) => [mark(result.holds), result.name, result.detail]),
    3,
  );
  const logged = Object.entries(errorLines)
    .filter(([, lines]) => lines.length > 0)
    .map(([component, lines]) => `  ${component}: ${lines.length} error lines, e.g. ${lines[0].slice(0, 600)}`);
  return [
    'Faults (503s: clean retryable answers, 503 + Retry-After and the like; bad: hangs, resets, other errors;',
    'recovered in: from the restart until every kind of operation has succeeded again)',
    faults,
    '',
    checks,
    `  (${attempts.length} attempts in all)`,
    ...(logged.length ? ['', 'Errors the components logged (level error or fatal)', ...logged] : []),
  ].join('\n');
}
