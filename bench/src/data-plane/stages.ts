import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { BenchSession } from '../measure/session.js';
import { usagePublisher } from '../measure/usage-records.js';
import { type Call, drive, type Run, type Summary, summarize, type Watch } from './drive.js';
import { send } from './requests.js';
import { answerTokens, passthroughModel, stageSeconds } from './settings.js';
import type { Traffic } from './traffic.js';
import type { DataPlaneWorld } from './world.js';

/** GET /v1/models with the API key: it must list the passthrough model. */
function modelsCall(agent: http.Agent, base: string, fullKey: string): Call {
  const url = new URL(`${base}/v1/models`);
  return async () => {
    const answer = await send(agent, url, { authorization: `Bearer ${fullKey}` });
    return {
      status: String(answer.status),
      inspect: () =>
        answer.status === 200 && answer.body.includes(passthroughModel) ? {} : { problem: `HTTP ${answer.status}: ${answer.body.slice(0, 300)}` },
    };
  };
}

/**
 * What a front-door request does beyond the upstream call that can be measured from outside,
 * each alone: the gateway's hop (GET /v1/models, whose key check is the data plane's replica,
 * on the data plane and through the gateway), and the one wait a request has on its way out,
 * its usage record published to the work stream and acknowledged (as the data plane publishes
 * it, from a NATS connection of this process; billing settles it like a request's, so its cost
 * goes to the ledger the final check adds up). Named as the report names them.
 */
async function stageCalls(session: BenchSession, world: DataPlaneWorld): Promise<Array<[string, Call]>> {
  const stageAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  session.defer('stage agent', async () => stageAgent.destroy());
  const { mesh } = world;
  const { fullKey, keyId, user } = world.account;
  const publish = await usagePublisher(session, mesh);
  const runId = randomBytes(4).toString('hex');
  let generations = 0;
  return [
    ['GET /v1/models on the data plane (the key from its replica)', modelsCall(stageAgent, mesh.env.DATA_PLANE_URL, fullKey)],
    ['GET /v1/models through the gateway', modelsCall(stageAgent, mesh.gatewayUrl, fullKey)],
    [
      'UsageRecord published to the work stream, acked (JetStream)',
      async () => {
        const { costUsd, duplicate } = await publish({
          generationId: `gen_bench_${runId}_${generations++}`,
          keyId,
          workspaceId: user.workspaceId,
          model: passthroughModel,
          tier: 'passthrough',
          inputTokens: 9n,
          outputTokens: BigInt(answerTokens),
          // What the upstream charges for a front-door answer of this bench: 17 tokens at the catalog's price.
          upstreamCostUsd: '0.000000000017',
        });
        return { status: '200', inspect: () => (duplicate ? { problem: 'JetStream had the generation id already' } : { costUsd }) };
      },
    ],
  ];
}

/**
 * Each step alone, 1 in flight, `stageSeconds` after a short warm-up: the steps of stageCalls,
 * and a whole request to the data plane without the gateway (to compare with direct at 1 in
 * flight: what the data plane adds, the gateway's hop apart).
 */
export async function stagesPhase(session: BenchSession, world: DataPlaneWorld, traffic: Traffic, watch: Watch): Promise<Record<string, Summary>> {
  session.progress(`the steps of a request alone, 1 in flight, ${stageSeconds} s each`);
  const stages: Record<string, Summary> = {};
  const alone = async (name: string, run: (seconds: number, watch?: Watch) => Promise<Run>) => {
    await run(0.3);
    stages[name] = summarize([await run(stageSeconds, watch)]);
  };
  const dataPlane = traffic.variants.dataPlane;
  await alone(dataPlane.name, (seconds, w) => traffic.run(dataPlane, seconds, 1, w));
  for (const [name, call] of await stageCalls(session, world)) await alone(name, (seconds, w) => drive(name, call, traffic.ledger, seconds, 1, w));
  return stages;
}
