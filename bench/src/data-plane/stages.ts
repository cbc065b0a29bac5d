import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { RoutingService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import type { BenchSession } from '../measure/session.js';
import { type Call, drive, type Ledger, type Summary, summarize, type Watch } from './drive.js';
import { send } from './requests.js';
import { answerTokens, fastModels, passthroughModel, requestTimeoutMs, stageSeconds } from './settings.js';
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
 * The steps of a front-door request, each alone, from this process with the data plane's kind
 * of client: the gateway's hop (GET /v1/models on the data plane and through the gateway),
 * AuthorizeKey with an estimate, RecordUsage, RouteModel, and one committed single-row INSERT
 * (the commit's floor). Named as the report names them.
 */
function stageCalls(session: BenchSession, world: DataPlaneWorld): Array<[string, Call]> {
  const stageAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  session.defer('stage agent', async () => stageAgent.destroy());
  const { mesh, db } = world;
  const { fullKey, keyId, user } = world.account;
  const meshTokens = new MeshTokens(mesh.env.SWITCHBOARD_MESH_SECRET);
  const asDataPlane = { caller: 'data-plane' };
  const keysClient = createPeerClient(KeyService, { name: 'keys', url: mesh.urls.keys }, meshTokens, asDataPlane);
  const usageClient = createPeerClient(UsageService, { name: 'billing', url: mesh.urls.billing }, meshTokens, asDataPlane);
  const routingClient = createPeerClient(RoutingService, { name: 'conversations', url: mesh.urls.conversations }, meshTokens, asDataPlane);
  const runId = randomBytes(4).toString('hex');
  let generations = 0;
  return [
    ['GET /v1/models on the data plane (AuthorizeKey without estimate inside)', modelsCall(stageAgent, mesh.env.DATA_PLANE_URL, fullKey)],
    ['GET /v1/models through the gateway', modelsCall(stageAgent, mesh.gatewayUrl, fullKey)],
    [
      'AuthorizeKey with an estimate (keys; the key has no cap: from memory)',
      async () => {
        const answer = await keysClient.authorizeKey({ fullKey, estimatedCostUsd: '0.000000000096' }, { timeoutMs: requestTimeoutMs });
        return { status: answer.allowed ? '200' : answer.reason, inspect: () => (answer.allowed ? {} : { problem: `refused: ${answer.reason}` }) };
      },
    ],
    [
      'RecordUsage, passthrough (billing: a debit and its outbox row)',
      async () => {
        const answer = await usageClient.recordUsage(
          {
            generationId: `gen_bench_${runId}_${generations++}`,
            keyId,
            workspaceId: user.workspaceId,
            model: passthroughModel,
            inputTokens: 9n,
            outputTokens: BigInt(answerTokens),
            upstreamCostUsd: '0.000000000017',
          },
          { timeoutMs: requestTimeoutMs },
        );
        return { status: '200', inspect: () => (answer.duplicate ? { problem: 'duplicate' } : { costUsd: answer.costUsd }) };
      },
    ],
    [
      'RouteModel fast (conversations)',
      async () => {
        const answer = await routingClient.routeModel({ tier: 'fast', routingPolicy: 'any' }, { timeoutMs: requestTimeoutMs });
        return { status: '200', inspect: () => (fastModels.includes(answer.model) ? {} : { problem: `routed to ${answer.model}` }) };
      },
    ],
    [
      'Postgres: one single-row INSERT committed (the bench database)',
      async () => {
        await db.query('INSERT INTO bench_commit_probe DEFAULT VALUES');
        return { status: '200', inspect: () => ({}) };
      },
    ],
  ];
}

/** Each step alone, 1 in flight, `stageSeconds` after a short warm-up; the probe table is dropped after. */
export async function stagesPhase(session: BenchSession, world: DataPlaneWorld, ledger: Ledger, watch: Watch): Promise<Record<string, Summary>> {
  session.progress(`the steps of a request alone, 1 in flight, ${stageSeconds} s each`);
  await world.db.query('CREATE TABLE IF NOT EXISTS bench_commit_probe (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())');
  const stages: Record<string, Summary> = {};
  for (const [name, call] of stageCalls(session, world)) {
    await drive(name, call, ledger, 0.3, 1);
    stages[name] = summarize([await drive(name, call, ledger, stageSeconds, 1, watch)]);
  }
  await world.db.query('DROP TABLE IF EXISTS bench_commit_probe');
  return stages;
}
