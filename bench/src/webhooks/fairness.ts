import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { registerUser } from '@switchboard/testkit/gateway-accounts';
import { type Latency, latencyOf } from '../measure/latency.js';
import { pollUntil } from '../measure/loop.js';
import type { BenchSession } from '../measure/session.js';
import { openLoop, publishClosedLoop } from './publish-loops.js';
import { allReceived } from './receiver.js';
import { receiptTimeoutMs } from './settings.js';
import { publisherOf, registerEndpoint, type WebhooksWorld } from './world.js';

/**
 * The fairness scenario of docs/webhooks.md#fairness as a bench line: workspace A has 40
 * endpoints whose receiver answers 200 after 14 s (successes: no circuit opens) and 1,000 events
 * queued for them (40,000 deliveries); workspace B's one endpoint, on the world's receiver that
 * answers at once, then gets 200 events, one every 40 ms. The result is B's event → receipt
 * latency (publish start → arrival), whose p99 the contract bounds at 1 s, and how many attempts
 * A held at once (its cap, WEBHOOK_WORKSPACE_CONCURRENCY). A's endpoints (and with them their
 * deliveries) are deleted at the end, so nothing of A is left in the queue for what runs next.
 */

const slowEndpoints = 40;
const slowEvents = 1000;
const slowReplyMs = 14_000;
const fairEvents = 200;
const fairRatePerSecond = 25;

export interface FairnessResult {
  /** B's publish start → arrival at its receiver, ms. */
  latency: Latency;
  /** B's events that arrived (of `events`). */
  received: number;
  events: number;
  /** A's attempts that were running at once before its first answer (WEBHOOK_WORKSPACE_CONCURRENCY). */
  slowHeldAtOnce: number;
  /** Calls that failed (publishes of A or B). */
  errors: number;
  firstProblem?: string;
}

/** An HTTPS receiver that answers 200 after `replyMs`; the times requests arrived. */
async function startSlowReceiver(certificate: { key: string; cert: string }, replyMs: number) {
  const arrivals: number[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const server = https.createServer(certificate, (req, res) => {
    req.resume();
    req.on('end', () => {
      arrivals.push(performance.now());
      const timer = setTimeout(() => {
        timers.delete(timer);
        res.writeHead(200).end('ok');
      }, replyMs);
      timers.add(timer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    arrivals,
    close: async () => {
      for (const timer of timers) clearTimeout(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** DELETE /v1/workspaces/{id}/webhooks/{webhook_id}. */
async function deleteEndpoint(gatewayUrl: string, user: { workspaceId: string; accessToken: string }, webhookId: string): Promise<void> {
  const response = await fetch(`${gatewayUrl}/v1/workspaces/${user.workspaceId}/webhooks/${webhookId}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${user.accessToken}` },
    signal: AbortSignal.timeout(15_000),
  });
  if (response.status !== 204) throw new Error(`DELETE …/webhooks/${webhookId} answered ${response.status}: ${(await response.text()).slice(0, 300)}`);
}

/** Runs the fairness scenario on the bench world's mesh (its default WEBHOOK_MAX_IN_FLIGHT and WEBHOOK_WORKSPACE_CONCURRENCY). */
export async function fairnessRun(session: BenchSession, world: Pick<WebhooksWorld, 'mesh' | 'certificate' | 'receiver' | 'runId'>): Promise<FairnessResult> {
  const { mesh, receiver, runId } = world;
  const slow = await startSlowReceiver(world.certificate, slowReplyMs);
  session.defer('fairness receiver', () => slow.close());
  const [userA, userB] = [await registerUser(mesh.gatewayUrl, 'webhooks-fair-a'), await registerUser(mesh.gatewayUrl, 'webhooks-fair-b')];
  const slowIds: string[] = [];
  for (let i = 0; i < slowEndpoints; i++) slowIds.push(await registerEndpoint(mesh.gatewayUrl, userA, `https://localhost:${slow.port}/a/${i}`));
  await registerEndpoint(mesh.gatewayUrl, userB, `https://localhost:${receiver.port}/fair`);
  const publishA = publisherOf(mesh, userA.workspaceId, runId);
  const publishB = publisherOf(mesh, userB.workspaceId, runId);

  session.progress(`fairness: A's ${slowEvents} events to ${slowEndpoints} endpoints answering after ${slowReplyMs / 1000} s`);
  const queued = await publishClosedLoop(publishA, 'fairness-a', slowEvents, 8);
  const heldAt = await pollUntil(
    async () => slow.arrivals.length,
    (count) => count >= Math.min(slowEndpoints, 32),
    { intervalMs: 20, stallTimeoutMs: 10_000, deadline: performance.now() + 15_000 },
    (count, stillMs) => `A's endpoints got ${count} attempts, none more for ${stillMs} ms`,
  );
  session.progress(`fairness: A holds ${slow.arrivals.length} attempts; B's ${fairEvents} events at ${fairRatePerSecond}/s`);
  const arrivals = receiver.expect('fairness', fairEvents);
  const fair = await openLoop(publishB, 'fairness', fairEvents, fairRatePerSecond);
  await allReceived(arrivals, receiptTimeoutMs);
  const values: number[] = [];
  for (let seq = 0; seq < fairEvents; seq++) if (arrivals.at[seq] > 0) values.push(arrivals.at[seq] - fair.starts[seq]);
  const firstSlow = slow.arrivals[0] ?? heldAt;
  const slowHeldAtOnce = slow.arrivals.filter((at) => at < firstSlow + slowReplyMs - 1000).length;

  session.progress(`fairness: deleting A's ${slowEndpoints} endpoints and their deliveries`);
  await slow.close();
  for (const webhookId of slowIds) await deleteEndpoint(mesh.gatewayUrl, userA, webhookId);
  return {
    latency: latencyOf(values),
    received: arrivals.received,
    events: fairEvents,
    slowHeldAtOnce,
    errors: queued.errors + fair.errors,
    firstProblem: queued.firstProblem ?? fair.firstProblem,
  };
}
