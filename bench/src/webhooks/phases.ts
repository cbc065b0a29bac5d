import { randomBytes } from 'node:crypto';
import { components } from '@switchboard/runtime/dev/mesh';
import { buildEventPayload } from '@switchboard/runtime/outbox';
import { round } from '../measure/latency.js';
import { sleep } from '../measure/loop.js';
import { postgresBackends } from '../measure/postgres.js';
import { cpuMeter } from '../measure/proc.js';
import type { BenchSession } from '../measure/session.js';
import { createBenchStream, jetstreamRun } from './jetstream.js';
import { openLoop, type PublishRun, publishClosedLoop, receiptLatency } from './publish-loops.js';
import { allReceived } from './receiver.js';
import { concurrency, events, jetstreamSeconds, latencySeconds, receiptTimeoutMs, warmupEvents } from './settings.js';
import type { WebhooksWorld } from './world.js';

type Watch = Record<string, Array<number | undefined>>;

/** One event through, then the warm-up, every event received; when the last one arrived. */
export async function warmUp(session: BenchSession, world: WebhooksWorld) {
  const { receiver, publish, mesh } = world;
  const first = receiver.expect('first', 1);
  await publish('first', 0);
  if ((await allReceived(first, 15_000)) === undefined)
    throw new Error(`the first event did not reach the receiver within 15 s:\n${mesh.output('webhooks').split('\n').slice(-20).join('\n')}`);
  session.progress(`warm-up: ${warmupEvents} events, ${concurrency} in flight`);
  const arrivals = receiver.expect('warmup', warmupEvents);
  const run = await publishClosedLoop(publish, 'warmup', warmupEvents, concurrency);
  const endedAt = await allReceived(arrivals, receiptTimeoutMs);
  if (endedAt === undefined) throw new Error(`${warmupEvents - arrivals.received} warm-up events did not arrive within ${receiptTimeoutMs} ms`);
  return { arrivals, run, endedAt };
}

/** The processes whose CPU is measured (after the warm-up: its Postgres backends are open then). */
export async function watchOf(world: WebhooksWorld): Promise<Watch> {
  const { mesh } = world;
  return {
    webhooks: [mesh.pid('webhooks')],
    postgres: await postgresBackends(mesh.env.DATABASE_URL, world.db),
    'nats-server': [world.natsPid],
    'bench (publisher + receiver)': [process.pid],
    // Their pollers and relays only: nothing of this load goes through them.
    'rest of the mesh': components.filter((component) => component !== 'webhooks').map((component) => mesh.pid(component)),
  };
}

/**
 * The JetStream baseline: a stream of its own (file storage like the events stream, deleted
 * after) and a message the size of the throughput run's last event envelope; `run` measures
 * `jetstreamSeconds` of acknowledged publishes to it.
 */
export async function jetstreamBaseline(session: BenchSession, world: WebhooksWorld) {
  const natsUrl = world.mesh.env.NATS_URL;
  const stream = `BENCH_WEBHOOKS_${process.pid}`;
  const subjectPrefix = `bench.webhooks.${process.pid}`;
  const payload = JSON.stringify(
    buildEventPayload(
      `evt_${randomBytes(11).toString('base64url')}`,
      {
        type: 'agent.completed',
        workspaceId: world.workspaceId,
        data: { bench_run: world.runId, bench_phase: 'throughput', bench_seq: events - 1, ok: true },
      },
      'webhooks',
    ),
  );
  await createBenchStream(session, natsUrl, stream, `${subjectPrefix}.>`);
  const watch = { 'nats-server': [world.natsPid], 'bench (publisher + receiver)': [process.pid] };
  return { payload, run: () => jetstreamRun(natsUrl, stream, `${subjectPrefix}.event`, payload, jetstreamSeconds, watch) };
}

/** A run of publishes of `phase` (`count` events) until the receiver has them all, and the CPU meanwhile. */
async function measuredRun<R extends PublishRun>(world: WebhooksWorld, watch: Watch, phase: string, count: number, publishAll: () => Promise<R>) {
  const arrivals = world.receiver.expect(phase, count);
  const stopMeter = cpuMeter(watch);
  const run = await publishAll();
  const lastArrival = await allReceived(arrivals, receiptTimeoutMs);
  const cpu = stopMeter();
  const seconds = ((lastArrival ?? performance.now()) - run.firstStartAt) / 1000;
  return { arrivals, run, lastArrival, cpu, seconds };
}

/** The throughput run: `events` publishes, `concurrency` in flight, until the receiver has each one. */
export async function throughputRun(session: BenchSession, world: WebhooksWorld, watch: Watch) {
  session.progress(`throughput: ${events} events, ${concurrency} PublishEvent calls in flight`);
  const measured = await measuredRun(world, watch, 'throughput', events, () => publishClosedLoop(world.publish, 'throughput', events, concurrency));
  const { arrivals, run, seconds } = measured;
  const eventsPerSecond = Math.round(arrivals.received / seconds);
  const publishRate = Math.round(run.ok / ((run.lastAnswerAt - run.firstStartAt) / 1000));
  return { ...measured, eventsPerSecond, publishRate };
}

/** The latency run: an open loop at half the measured rate for `latencySeconds`; publish start → receipt. */
export async function latencyRun(session: BenchSession, world: WebhooksWorld, watch: Watch, webhookRate: number) {
  const rate = Math.max(1, webhookRate / 2);
  const count = Math.max(1, Math.round(rate * latencySeconds));
  session.progress(`latency: open loop at ${round(rate, 1)} events/s (half the measured ${webhookRate}/s) for ${latencySeconds} s (${count} events)`);
  const measured = await measuredRun(world, watch, 'latency', count, () => openLoop(world.publish, 'latency', count, rate));
  return { ...measured, rate, count, latency: receiptLatency(measured.run, measured.arrivals) };
}

/** Waits until the database's counters include what ran until `at` (performance.now()). */
export const untilFlushed = (at: number, flushMs: number) => sleep(at + flushMs - performance.now());
