import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { Money } from '@switchboard/runtime/money';
import { sleep } from '../measure/loop.js';
import { type BenchSession, exitedComponents } from '../measure/session.js';
import { balanceOf, spendOf } from './account.js';
import type { Summary } from './drive.js';
import { settle } from './settings.js';
import type { Traffic } from './traffic.js';
import type { DataPlaneWorld } from './world.js';

/** The components a front-door request goes through, the ones checked and whose warnings are shown. */
const path = ['gateway', 'data-plane', 'keys', 'billing', 'conversations'] as const;

/**
 * After the load: the upstream's calls, and the key's spend and the workspace's balance once
 * they show every cost the platform answered, or once neither moved for a while (`settle`). Both
 * are settled asynchronously (billing consumes the usage records in batches, keys applies
 * billing's events), so they are polled.
 */
export async function settleBilling(session: BenchSession, world: DataPlaneWorld, traffic: Traffic) {
  const { mesh, account } = world;
  const token = account.user.accessToken;
  const upstreamCalls = await world.upstream.calls();
  session.progress('waiting for the key spend and the balance to show every answered cost');
  const answered = traffic.ledger.total();
  const limitedAnswered = traffic.limitedLedger.total();
  const expectedBalance = new Money(account.balanceAfterTopUp).minus(answered).minus(limitedAnswered);
  const expectedSpend = new Money(account.spendAtStart).plus(answered);
  const expectedLimitedSpend = new Money(account.limited.spendAtStart).plus(limitedAnswered);
  const started = performance.now();
  const read = async () => ({
    spendAtEnd: await spendOf(mesh.gatewayUrl, token, account.keyId),
    limitedSpendAtEnd: await spendOf(mesh.gatewayUrl, token, account.limited.keyId),
    balanceAtEnd: await balanceOf(mesh.gatewayUrl, token),
  });
  let seen = await read();
  let movedAt = performance.now();
  const waiting = () => performance.now() - movedAt < settle.stallTimeoutMs && performance.now() - started < settle.maxWaitMs;
  const complete = () =>
    new Money(seen.spendAtEnd).eq(expectedSpend) &&
    new Money(seen.limitedSpendAtEnd).eq(expectedLimitedSpend) &&
    new Money(seen.balanceAtEnd).eq(expectedBalance);
  while (!complete() && waiting()) {
    await sleep(250);
    const before = seen;
    seen = await read();
    if (seen.spendAtEnd !== before.spendAtEnd || seen.limitedSpendAtEnd !== before.limitedSpendAtEnd || seen.balanceAtEnd !== before.balanceAtEnd)
      movedAt = performance.now();
  }
  return { upstreamCalls, answered, limitedAnswered, expectedBalance, ...seen, settledAfterMs: Math.round(performance.now() - started) };
}

export type Settled = Awaited<ReturnType<typeof settleBilling>>;

/**
 * Failed requests, an upstream call count other than one per request, a spend or a balance that
 * did not move by exactly the answered costs (the published usage records' included), no answer
 * of tier fast, a component that exited.
 */
export function dataPlaneErrors(world: DataPlaneWorld, traffic: Traffic, summaries: Summary[], settled: Settled): string[] {
  const errors: string[] = [];
  for (const summary of summaries) {
    if (summary.failed > 0)
      errors.push(
        `${summary.variant}, ${summary.inFlight} in flight: ${summary.failed} requests failed ${JSON.stringify(summary.failures)} (first: ${summary.firstProblem})`,
      );
  }
  const { sent } = traffic;
  const requestsSent = sent.direct + traffic.platformRequestsSent;
  const { answered, limitedAnswered, spendAtEnd, limitedSpendAtEnd, balanceAtEnd, expectedBalance } = settled;
  if (settled.upstreamCalls !== requestsSent)
    errors.push(
      `the upstream got ${settled.upstreamCalls} calls for ${requestsSent} requests sent (${sent.direct} direct, ${sent['front door']} front door, ${sent['data plane']} to the data plane alone)`,
    );
  const spendMoved = new Money(spendAtEnd).minus(world.account.spendAtStart);
  if (!spendMoved.eq(answered))
    errors.push(
      `${settled.settledAfterMs} ms after the load the key's spend had moved by ${spendMoved.toFixed()} USD, the platform answered costs summing to ${answered.toFixed()} USD`,
    );
  const limitedMoved = new Money(limitedSpendAtEnd).minus(world.account.limited.spendAtStart);
  if (!limitedMoved.eq(limitedAnswered))
    errors.push(
      `${settled.settledAfterMs} ms after the load the spend of the key with every limit had moved by ${limitedMoved.toFixed()} USD, the platform answered it costs summing to ${limitedAnswered.toFixed()} USD`,
    );
  if (!new Money(balanceAtEnd).eq(expectedBalance))
    errors.push(
      `${settled.settledAfterMs} ms after the load the workspace balance was ${balanceAtEnd} USD, expected ${expectedBalance.toFixed()} (after the top-up ${world.account.balanceAfterTopUp} − answered costs ${answered.plus(limitedAnswered).toFixed()})`,
    );
  if ((traffic.ledger.tiers.fast ?? 0) === 0) errors.push('no service/fast answer said tier "fast"');
  errors.push(...exitedComponents(world.mesh, path));
  return errors;
}

/** The first 3 warning and error lines each component of the path logged. */
export function meshWarnings(mesh: Mesh): string[] {
  return (['data-plane', 'gateway', 'keys', 'billing', 'conversations'] as const).flatMap((component) =>
    mesh
      .output(component)
      .split('\n')
      .filter((line) => line.includes('"level":40') || line.includes('"level":50') || line.includes('"level":60'))
      .slice(0, 3)
      .map((line) => `${component}: ${line.slice(0, 300)}`),
  );
}
