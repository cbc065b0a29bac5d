import { describe, expect, it } from 'vitest';
import { Metrics } from '../src/metrics.js';

describe('Metrics', () => {
  it('keeps the last value of a gauge whose read fails, and the rest of the scrape', async () => {
    const metrics = new Metrics('test');
    let reads = 0;
    metrics.gauge('queue_depth', 'A depth read from somewhere that may be down.', [], (gauge) => {
      reads += 1;
      if (reads > 1) throw new Error('database unavailable');
      gauge.set(7);
    });
    expect(await metrics.registry.metrics()).toMatch(/^queue_depth\{component="test"\} 7$/m);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^queue_depth\{component="test"\} 7$/m);
    expect(text).toMatch(/^process_cpu_user_seconds_total\{component="test"\} /m);
    // Counted (and shown from the next scrape on: a scrape reads its metrics side by side).
    const failures = await metrics.registry.getSingleMetric('metrics_collect_failures_total')!.get();
    expect(failures.values).toEqual([{ value: 1, labels: { metric: 'queue_depth' } }]);
  });
});
