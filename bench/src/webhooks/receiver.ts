import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { sleep } from '../measure/loop.js';

/** What the receiver saw of one phase's events (indexed by the `bench_seq` of their data). */
export interface Arrivals {
  at: Float64Array;
  received: number;
  duplicates: number;
}

/** An HTTPS receiver in this process that answers 204 at once and notes when each event arrived. */
export async function startReceiver(key: string, cert: string) {
  const phases = new Map<string, Arrivals>();
  let requests = 0;
  let unknown = 0;
  const server = https.createServer({ key, cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const at = performance.now();
      res.writeHead(204).end();
      requests += 1;
      try {
        const data = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data?: { bench_phase?: string; bench_seq?: number } }).data;
        const phase = phases.get(data?.bench_phase ?? '');
        const seq = data?.bench_seq;
        if (!phase || typeof seq !== 'number' || seq < 0 || seq >= phase.at.length) {
          unknown += 1;
          return;
        }
        if (phase.at[seq] > 0) phase.duplicates += 1;
        else {
          phase.at[seq] = at;
          phase.received += 1;
        }
      } catch {
        unknown += 1;
      }
    });
  });
  // Longer than the sender's idle sockets (30 s), so it never reuses a socket this side just closed.
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    expect(phase: string, count: number): Arrivals {
      const arrivals = { at: new Float64Array(count), received: 0, duplicates: 0 };
      phases.set(phase, arrivals);
      return arrivals;
    },
    stats: () => ({ requests, unknown }),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Waits until every event of a phase arrived; the time of the last arrival (or undefined after the timeout). */
export async function allReceived(arrivals: Arrivals, timeoutMs: number): Promise<number | undefined> {
  const deadline = performance.now() + timeoutMs;
  while (arrivals.received < arrivals.at.length) {
    if (performance.now() > deadline) return undefined;
    await sleep(2);
  }
  return arrivals.at.reduce((latest, at) => Math.max(latest, at), 0);
}
