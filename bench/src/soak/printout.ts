import { components } from '@switchboard/runtime/dev/mesh';
import type { InvariantResult } from '@switchboard/testkit/chaos/invariants';
import { table } from '@switchboard/testkit/text-table';
import { fmt } from '../report.js';
import type { GrowthRow } from './growth.js';
import type { Sample } from './samples.js';
import { growthLimitPct, warmupMinutes } from './settings.js';

/** The tables of bench:soak: RSS over time (a column a minute), the growth per component, the invariants. */
export function soakTables(samples: Sample[], rows: GrowthRow[], invariants: InvariantResult[]): string[] {
  const end = samples[samples.length - 1].at;
  const minuteMarks = Array.from({ length: Math.floor(end / 60) + 1 }, (_, i) => i * 60);
  const overTime = table(
    ['RSS (MB)', ...minuteMarks.map((at) => `${at / 60} min`)],
    components.map((component) => [
      component,
      ...minuteMarks.map((at) => {
        const nearest = samples.reduce((best, s) => (Math.abs(s.at - at) < Math.abs(best.at - at) ? s : best), samples[0]);
        return fmt(nearest.rssMb[component], 1);
      }),
    ]),
  );
  const growth = table(
    [
      'component',
      `RSS baseline (${warmupMinutes}–${warmupMinutes + 1} min)`,
      'RSS end (last min)',
      'RSS max',
      'RSS growth',
      `< ${growthLimitPct} %`,
      'live old space: baseline → end',
      'outside the V8 heap: baseline → end',
    ],
    rows.map((row) => [
      row.component,
      fmt(row.baseline, 1),
      fmt(row.last, 1),
      fmt(row.max, 1),
      `${fmt(row.growthPct, 1)} %`,
      row.holds ? '✓' : '✗',
      `${fmt(row.liveBaseline, 1)} → ${fmt(row.liveLast, 1)} MB`,
      `${fmt(row.outsideBaseline, 1)} → ${fmt(row.outsideLast, 1)} MB`,
    ]),
  );
  const checks = table(
    ['', 'invariant (whole run)', 'detail'],
    invariants.map((result) => [result.holds ? '✓' : '✗', result.name, result.detail]),
    3,
  );
  return [overTime, '', growth, '', checks];
}
