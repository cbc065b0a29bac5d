import { table } from '../text-table.js';
import type { InvariantResult } from './invariants.js';
import { type MoneyAttempt, type MoneyOutcome, overlapsWindows } from './money-path.js';

/** One fault of the money-path run: when it was injected, when its target was back, and the end of the steady load after it. */
export interface MoneyFaultWindow {
  fault: string;
  injectedAt: number;
  restoredAt: number;
  endAt: number;
  /** For the data plane's kill: its leases' return. */
  lease?: LeaseReturn;
}

export interface LeaseReturn {
  /** From the kill until the account whose room a dead replica's lease held was served again; undefined: not within the wait. */
  backMs: number | undefined;
  /** The account's 402s meanwhile. */
  refusals: number;
  /** From the kill until the lease was due back: LEASE_TTL (docs/money-path.md#leases), or the restart if later. */
  dueMs: number;
  /** Served again within a little of its due time. */
  onTime: boolean;
}

/** What one fault did to the load: the attempts under way at its injection or sent until the end of the steady load after it. */
export interface MoneyFaultRow {
  fault: string;
  /** Seconds into the load. */
  injectedAtS: number;
  downMs: number;
  requests: number;
  outcomes: Record<MoneyOutcome, number>;
  /** Of them, `bad` ones and streams cut while no data plane was killed. */
  bad: number;
  lease?: LeaseReturn;
  holds: boolean;
}

/**
 * The rows of the run's faults. A fault holds when no attempt of its window went wrong (see
 * MoneyOutcome) and, for the data plane's kill, the dead replica's leases came back on time.
 */
export function moneyFaultRows(
  windows: MoneyFaultWindow[],
  attempts: MoneyAttempt[],
  options: { loadStartedAt: number; cutWindows: Array<[number, number]> },
): MoneyFaultRow[] {
  return windows.map((window) => {
    const under = attempts.filter((attempt) => attempt.at <= window.endAt && attempt.at + attempt.ms >= window.injectedAt);
    const outcomes: Record<MoneyOutcome, number> = { ok: 0, refused: 0, unavailable: 0, cut: 0, bad: 0 };
    for (const attempt of under) outcomes[attempt.outcome]++;
    const bad = under.filter((attempt) => attempt.outcome === 'bad' || (attempt.outcome === 'cut' && !overlapsWindows(attempt, options.cutWindows))).length;
    return {
      fault: window.fault,
      injectedAtS: (window.injectedAt - options.loadStartedAt) / 1000,
      downMs: window.restoredAt - window.injectedAt,
      requests: under.length,
      outcomes,
      bad,
      lease: window.lease,
      holds: bad === 0 && (window.lease?.onTime ?? true),
    };
  });
}

const leaseCell = (lease: LeaseReturn | undefined) =>
  lease === undefined
    ? '-'
    : `${lease.backMs === undefined ? 'never' : `${(lease.backMs / 1000).toFixed(1)} s`} (due ${(lease.dueMs / 1000).toFixed(1)} s, ${lease.refusals} 402s)`;

/** The faults and the invariants of the money-path run, as the bench and the test print them. */
export function formatMoneyChaosReport(rows: MoneyFaultRow[], invariants: InvariantResult[], attempts: MoneyAttempt[]): string {
  const mark = (holds: boolean) => (holds ? '✓' : '✗');
  const faults = table(
    ['fault', 'injected at', 'down', 'requests', 'answered', 'refused', '503s', 'cut', 'bad', 'lease back', 'holds'],
    rows.map((row) => [
      row.fault,
      `${row.injectedAtS.toFixed(1)} s`,
      `${(row.downMs / 1000).toFixed(1)} s`,
      String(row.requests),
      String(row.outcomes.ok),
      String(row.outcomes.refused),
      String(row.outcomes.unavailable),
      String(row.outcomes.cut),
      String(row.bad),
      leaseCell(row.lease),
      mark(row.holds),
    ]),
  );
  const checks = table(
    ['', 'invariant (whole run)', 'detail'],
    invariants.map((result) => [mark(result.holds), result.name, result.detail]),
    3,
  );
  return [
    'Money-path faults (requests: under way at the injection or sent until the end of the steady load after it;',
    'answered: in full; refused: 402 before the upstream; 503s: with Retry-After; cut: streams a killed data plane cut;',
    "lease back: from the kill until the dead replica's leases served again, due after LEASE_TTL or the restart)",
    faults,
    '',
    checks,
    `  (${attempts.length} requests in all)`,
  ].join('\n');
}
