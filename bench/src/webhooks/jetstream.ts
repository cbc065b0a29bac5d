import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { jetstream, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { type Latency, latencyOf, round } from '../measure/latency.js';
import { closedLoop, Tally } from '../measure/loop.js';
import { type CpuUse, cpuMeter } from '../measure/proc.js';
import type { BenchSession } from '../measure/session.js';
import { concurrency, maxJetstreamPublishes } from './settings.js';

export interface JetstreamRun {
  published: number;
  errors: number;
  seconds: number;
  perSecond: number;
  latencyMs: Latency;
  cpu: CpuUse;
  firstProblem?: string;
}

/** Acknowledged publishes to a temporary file stream, `concurrency` in flight, for `seconds`. */
export async function jetstreamRun(
  natsUrl: string,
  stream: string,
  subject: string,
  payload: string,
  seconds: number,
  watch: Record<string, Array<number | undefined>>,
): Promise<JetstreamRun> {
  const nc = await connect({ servers: natsUrl, timeout: 5000 });
  try {
    const js = jetstream(nc);
    const tally = new Tally();
    // Half a second of warm-up on the fresh connection, not measured.
    await closedLoop(concurrency, { maxCalls: Number.POSITIVE_INFINITY, seconds: 0.5 }, async () => {
      await js.publish(subject, payload);
    });
    const stopMeter = cpuMeter(watch);
    const elapsed = await closedLoop(concurrency, { maxCalls: maxJetstreamPublishes, seconds }, async () => {
      const callStarted = performance.now();
      try {
        const ack = await js.publish(subject, payload);
        if (ack.stream !== stream) throw new Error(`acknowledged by stream ${ack.stream}`);
        tally.pass(performance.now() - callStarted);
      } catch (err) {
        tally.error((err as Error).message);
      }
    });
    return {
      published: tally.ok,
      errors: tally.errors,
      seconds: round(elapsed),
      perSecond: Math.round(tally.ok / elapsed),
      latencyMs: latencyOf(tally.latencies),
      cpu: stopMeter(),
      firstProblem: tally.firstProblem,
    };
  } finally {
    await nc.close();
  }
}

/** A temporary stream of file storage, like the events stream, deleted at the end of the session. */
export async function createBenchStream(session: BenchSession, natsUrl: string, stream: string, subjects: string): Promise<void> {
  const nc = await connect({ servers: natsUrl, timeout: 5000 });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: stream, subjects: [subjects], retention: RetentionPolicy.Limits, storage: StorageType.File });
  await nc.close();
  session.defer('JetStream stream', async () => {
    const conn = await connect({ servers: natsUrl, timeout: 5000 });
    await (await jetstreamManager(conn)).streams.delete(stream).catch(() => false);
    await conn.close();
  });
}

/** The nats-server listening on `natsUrl`'s port, found by its command line (when it runs on this host). */
export function natsServerPid(natsUrl: string, own?: number): number | undefined {
  if (own) return own;
  const port = new URL(natsUrl).port || '4222';
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (!path.basename(args[0] ?? '').startsWith('nats-server')) continue;
      const portArg = args.findIndex((arg) => arg === '-p' || arg === '--port');
      if ((portArg >= 0 ? args[portArg + 1] : '4222') === port) return Number(entry);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return undefined;
}
