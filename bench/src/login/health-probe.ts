import { sleep } from '../measure/loop.js';

/** Health checks of identity every `intervalMs` until stopped; returns their latencies. */
export function probeHealth(identityUrl: string, intervalMs: number): { stop(): Promise<{ latencies: number[]; failures: number }> } {
  const latencies: number[] = [];
  let failures = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      try {
        const response = await fetch(`${identityUrl}/grpc.health.v1.Health/Check`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"service":"liveness"}',
          signal: AbortSignal.timeout(5000),
        });
        await response.text();
        if (response.ok) latencies.push(performance.now() - started);
        else failures++;
      } catch {
        failures++;
      }
      await sleep(intervalMs);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { latencies, failures };
    },
  };
}
