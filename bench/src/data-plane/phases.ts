import { sleep } from '../measure/loop.js';
import { databaseActivity, statsFlushMs } from '../measure/postgres.js';
import { rpcCalls } from '../measure/rpc-calls.js';
import type { BenchSession } from '../measure/session.js';
import { durationSeconds, warmupSeconds } from '../scenarios.js';
import { type Summary, summarize, type Watch } from './drive.js';
import { concurrency, halfSeconds, lowInFlight, lowLoadSeconds, pacedPauseMs, pacedSeconds } from './settings.js';
import type { Traffic } from './traffic.js';
import type { DataPlaneWorld } from './world.js';

/**
 * Throughput at `concurrency` in flight: direct and front door interleaved per variant after a
 * warm-up of each, then service/fast, whose run opens the span of the database and RPC counters.
 */
export async function throughputPhase(session: BenchSession, world: DataPlaneWorld, traffic: Traffic, watch: Watch) {
  const { variants } = traffic;
  const throughput: Record<string, Summary> = {};
  for (const [direct, front] of [
    [variants.direct, variants.front],
    [variants.directStream, variants.frontStream],
  ] as const) {
    session.progress(`${concurrency} in flight: warm-up ${warmupSeconds} s each, then ${direct.name} / ${front.name} interleaved, ${halfSeconds} s × 2 each`);
    if (warmupSeconds > 0) {
      await traffic.run(direct, warmupSeconds, concurrency);
      await traffic.run(front, warmupSeconds, concurrency);
    }
    const pair = await traffic.interleaved(direct, front, halfSeconds, concurrency, watch);
    throughput[direct.name] = pair.direct;
    throughput[front.name] = pair.front;
  }
  session.progress(`${concurrency} in flight: ${variants.fast.name}, warm-up ${warmupSeconds} s, then ${durationSeconds} s`);
  if (warmupSeconds > 0) await traffic.run(variants.fast, warmupSeconds, concurrency);
  // Every backend's counters of the runs before flushed: the span below is the fast run's and after.
  await sleep(statsFlushMs);
  const activityBefore = await databaseActivity(world.db);
  const rpcBefore = await rpcCalls(world.mesh.metricsUrls);
  const frontSentBefore = traffic.platformRequestsSent;
  throughput[variants.fast.name] = summarize([await traffic.run(variants.fast, durationSeconds, concurrency, watch)]);
  return { throughput, activityBefore, rpcBefore, frontSentBefore, fastFrontSent: traffic.platformRequestsSent - frontSentBefore };
}

/** Latency at low load, 1 and 4 in flight, the same interleaving, then service/fast at 1; keyed `<in flight>|<variant>`. */
export async function lowLoadPhase(session: BenchSession, traffic: Traffic, watch: Watch): Promise<Record<string, Summary>> {
  const { variants } = traffic;
  const lowLoad: Record<string, Summary> = {};
  const lowHalf = lowLoadSeconds / 2;
  for (const inFlight of lowInFlight) {
    for (const [direct, front] of [
      [variants.direct, variants.front],
      [variants.directStream, variants.frontStream],
    ] as const) {
      session.progress(`${inFlight} in flight: ${direct.name} / ${front.name} interleaved, ${lowHalf} s × 2 each`);
      await traffic.run(direct, 0.5, inFlight);
      await traffic.run(front, 0.5, inFlight);
      const pair = await traffic.interleaved(direct, front, lowHalf, inFlight, watch);
      lowLoad[`${inFlight}|${direct.name}`] = pair.direct;
      lowLoad[`${inFlight}|${front.name}`] = pair.front;
    }
  }
  session.progress(`1 in flight: ${variants.fast.name}, ${lowLoadSeconds} s`);
  await traffic.run(variants.fast, 0.5, 1);
  lowLoad[`1|${variants.fast.name}`] = summarize([await traffic.run(variants.fast, lowLoadSeconds, 1, watch)]);
  return lowLoad;
}

/**
 * The key with every limit set next to the key without any (docs/api/front-door.md#order-of-checks:
 * every check and lease a limit adds), the same request through the front door, interleaved
 * without, with, with, without: at `concurrency` in flight for the rate, at 1 for the latency.
 * Keyed `<in flight>|<variant>`.
 */
export async function limitsPhase(session: BenchSession, traffic: Traffic, watch: Watch): Promise<Record<string, Summary>> {
  const { variants } = traffic;
  const runs: Record<string, Summary> = {};
  for (const [inFlight, seconds] of [
    [concurrency, halfSeconds],
    [1, lowLoadSeconds / 2],
  ] as const) {
    session.progress(`${inFlight} in flight: ${variants.front.name} / ${variants.frontLimited.name} interleaved, ${seconds} s × 2 each`);
    await traffic.run(variants.front, 0.5, inFlight);
    await traffic.run(variants.frontLimited, 0.5, inFlight);
    const pair = await traffic.interleaved(variants.front, variants.frontLimited, seconds, inFlight, watch);
    runs[`${inFlight}|${variants.front.name}`] = pair.direct;
    runs[`${inFlight}|${variants.frontLimited.name}`] = pair.front;
  }
  return runs;
}

/**
 * Paced: one request, then a pause, so the work each request leaves behind (its usage record's
 * settlement in billing, the usage event's relay and consumers) is done before the next one;
 * each hop then wakes an idle process. Direct both ways, so each front-door run has its baseline.
 */
export async function pacedPhase(session: BenchSession, traffic: Traffic, watch: Watch): Promise<Record<string, Summary>> {
  const { variants } = traffic;
  session.progress(`1 in flight, a ${pacedPauseMs} ms pause after each answer: direct and front door, non-streaming and streaming, ${pacedSeconds} s each`);
  const paced: Record<string, Summary> = {};
  for (const variant of [variants.direct, variants.front, variants.directStream, variants.frontStream]) {
    paced[variant.name] = summarize([await traffic.run(variant, pacedSeconds, 1, watch, pacedPauseMs)]);
  }
  return paced;
}
