import { readFileSync } from 'node:fs';
import type { DescService } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { ExchangeService, RoutingService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { readConversationsConfig } from '@switchboard/conversations/config';
import { prepareConversations } from '@switchboard/conversations/prepare';
import { registerRoutes } from '@switchboard/conversations/server';
import { readDataPlaneConfig } from '@switchboard/data-plane/config';
import { ConversationDirectory } from '@switchboard/data-plane/conversation-directory';
import { toErrorResponse } from '@switchboard/data-plane/openai-error';
import { RoutingReplica } from '@switchboard/data-plane/routing-replica';
import { ApiError } from '@switchboard/runtime/api-error';
import { createPeerClient } from '@switchboard/runtime/clients';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService } from '@switchboard/runtime/in-process';
import { freePort } from '@switchboard/runtime/infra';
import { createLogger } from '@switchboard/runtime/log';
import { defaultCatalogPath, ModelCatalog, type RoutingPolicy, type ServiceTier } from '@switchboard/runtime/model-catalog';
import { Sampler } from '@switchboard/runtime/routing-sampler';
import { type RpcServer, startRpcServer } from '@switchboard/runtime/server';
import { eventually } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The data plane's in-memory views of the conversations service, against the real service: its
 * handlers on a schema of their own, served by the real RPC server, called over the network as
 * the data plane calls it, so stopping the server is a real outage.
 */

const log = createLogger('data-plane', 'silent');
let service: InProcessService;
let server: RpcServer;
let handlers: ReturnType<typeof prepareConversations>;
let url: string;

/**
 * The data plane's catalog differs from the conversations service's (the shipped one) as a
 * rollout can make it: a fast model conversations does not score, and balanced without its cn
 * models.
 */
const shipped = JSON.parse(readFileSync(defaultCatalogPath, 'utf8')) as { regions: unknown; models: Array<{ id: string; region: string; tiers: string[] }> };
const catalog = ModelCatalog.parse(
  JSON.stringify({
    regions: shipped.regions,
    models: [
      ...shipped.models.filter((model) => !(model.region === 'cn' && model.tiers.includes('balanced'))),
      { id: 'fresh-model', region: 'overseas', tiers: ['fast'], input_usd_per_1m: '0.10', output_usd_per_1m: '0.40' },
    ],
  }),
);

/** A client of the conversations service as the data plane makes it (main.ts). */
const client = <S extends DescService>(rpcService: S) =>
  createPeerClient(rpcService, { name: 'conversations', url }, service.runtime.meshTokens, { caller: 'data-plane' });

beforeAll(async () => {
  service = await inProcessService('conversations', new URL('../../services/conversations/dist/migrations/', import.meta.url));
  handlers = prepareConversations(service.runtime, readConversationsConfig({}));
  server = await startRpcServer({
    name: 'conversations',
    port: await freePort(),
    host: '127.0.0.1',
    routes: (router) => registerRoutes(router, handlers),
    meshTokens: service.runtime.meshTokens,
    log,
    metrics: service.runtime.metrics,
    isHealthy: async () => true,
  });
  url = `http://127.0.0.1:${server.port}`;
  await service.runtime.db('routing_scores').insert([
    { tier: 'fast', model: 'gpt-4o-mini', thumbs_up: 0, thumbs_down: 200 },
    { tier: 'fast', model: 'gpt-4.1-nano', thumbs_up: 200, thumbs_down: 0 },
  ]);
});

afterAll(async () => {
  await server?.close(0);
  await service?.stop();
});

/** The share of `calls` picks that went to each model. */
function shares(replica: RoutingReplica, tier: ServiceTier, policy: RoutingPolicy, calls = 4000): Record<string, number> {
  const counts: Record<string, number> = {};
  for (let i = 0; i < calls; i++) {
    const { model } = replica.pick(tier, policy);
    counts[model.id] = (counts[model.id] ?? 0) + 1;
  }
  return Object.fromEntries(Object.entries(counts).map(([name, count]) => [name, count / calls]));
}

function refusalOf(pick: () => unknown): ApiError {
  try {
    pick();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error('expected the pick to be refused');
}

describe('RoutingReplica', () => {
  it('refuses to start on a ROUTING_REFRESH under 100 ms, naming it', () => {
    expect(readDataPlaneConfig(catalog, { ...process.env, ROUTING_REFRESH: '' }).routingRefreshMs).toBe(1000);
    expect(() => readDataPlaneConfig(catalog, { ...process.env, ROUTING_REFRESH: '50ms' })).toThrow(/ROUTING_REFRESH/);
  });

  it('before its first snapshot picks uniformly among the catalog candidates the policy allows', () => {
    const replica = new RoutingReplica({ log, catalog, routing: client(RoutingService), refreshMs: 100, sampler: new Sampler(1) });
    expect(replica.refreshedAt).toBeUndefined();
    const overseas = shares(replica, 'fast', 'overseas-only');
    expect(Object.keys(overseas).sort()).toEqual(['fresh-model', 'gpt-4.1-nano', 'gpt-4o-mini']);
    for (const share of Object.values(overseas)) expect(Math.abs(share - 1 / 3)).toBeLessThan(0.04);
    expect(shares(replica, 'fast', 'cn-only', 200)).toEqual({ 'qwen-turbo': 1 });
    // The answer names the upstream of the model's region.
    expect(replica.pick('fast', 'cn-only').region).toBe(catalog.regions.get('cn'));
  });

  it('refuses a policy that allows no candidate of the tier with the 403 RouteModel’s refusal was answered with', () => {
    const replica = new RoutingReplica({ log, catalog, routing: client(RoutingService), refreshMs: 100 });
    const refusal = refusalOf(() => replica.pick('balanced', 'cn-only'));
    expect([refusal.status, refusal.code, refusal.options.field, refusal.message]).toEqual([
      403,
      'routing_policy_violation',
      'model',
      'No model of the balanced tier is allowed by the cn-only routing policy.',
    ]);
    expect(toErrorResponse(refusal, 'req_1')).toMatchObject({ status: 403, body: { error: { type: 'permission_error', param: 'model' } } });
  });

  it('reads the scores in the background and picks by them, with the prior for a model they do not name', async () => {
    const replica = new RoutingReplica({ log, catalog, routing: client(RoutingService), refreshMs: 100, sampler: new Sampler(7) });
    replica.start();
    try {
      await eventually(() => replica.refreshedAt, 'the first snapshot');
      const overseas = shares(replica, 'fast', 'overseas-only');
      // gpt-4o-mini (0 up, 200 down) by the exploration floor only; fresh-model (the prior) beats Beta(201, 1) rarely.
      expect(overseas['gpt-4o-mini']).toBeLessThan(0.04);
      expect(overseas['fresh-model']).toBeLessThan(0.04);
      expect(overseas['gpt-4.1-nano']).toBeGreaterThan(0.92);

      // New ratings reach the picks within a refresh (and the service's own second of caching).
      await service.runtime.db('routing_scores').where({ tier: 'fast', model: 'gpt-4o-mini' }).update({ thumbs_up: 5000, thumbs_down: 0 });
      await eventually(() => shares(replica, 'fast', 'overseas-only', 500)['gpt-4o-mini'] > 0.8, 'the new scores to steer the picks');
    } finally {
      await replica.stop();
    }
  });
});

describe('ConversationDirectory', () => {
  const workspaceId = newId('org');

  it('lets the workspace’s conversation through, and refuses another workspace’s or an unknown one with the front door’s 404', async () => {
    const directory = new ConversationDirectory({ exchanges: client(ExchangeService) });
    const { conversationId } = await handlers.conversations.create(workspaceId, {});
    await directory.check(workspaceId, conversationId!);
    for (const [workspace, conversation] of [
      [newId('org'), conversationId!],
      [workspaceId, newId('conv')],
    ]) {
      const refusal = await directory.check(workspace, conversation).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(ConnectError.from(refusal).code).toBe(Code.NotFound);
      expect(toErrorResponse(refusal, 'req_1')).toMatchObject({ status: 404, body: { error: { code: 'conversation_not_found', type: 'not_found_error' } } });
    }
  });

  it('remembers a yes, never a no', async () => {
    const directory = new ConversationDirectory({ exchanges: client(ExchangeService) });
    const conversationId = newId('conv');
    await expect(directory.check(workspaceId, conversationId)).rejects.toThrow(/conversation/i);
    await service.runtime.db('conversations').insert({ id: conversationId, workspace_id: workspaceId });
    await directory.check(workspaceId, conversationId);
    // Deleted since: still let through while remembered (the conversations service drops its exchange).
    await service.runtime.db('conversations').where({ id: conversationId }).delete();
    await directory.check(workspaceId, conversationId);
  });
});

describe('while the conversations service is away', () => {
  const workspaceId = newId('org');
  let now = Date.now();
  const clock = () => new Date(now);
  let routing: RoutingReplica;
  let directory: ConversationDirectory;
  const remembered: string[] = [];

  beforeAll(async () => {
    routing = new RoutingReplica({ log, catalog, routing: client(RoutingService), refreshMs: 100, sampler: new Sampler(3) });
    await service.runtime.db('routing_scores').where({ tier: 'fast', model: 'gpt-4o-mini' }).update({ thumbs_up: 0, thumbs_down: 5000 });
    await eventually(async () => {
      await routing.refresh();
      return (shares(routing, 'fast', 'overseas-only', 500)['gpt-4o-mini'] ?? 0) < 0.05;
    }, 'a snapshot of the scores');
    directory = new ConversationDirectory({ exchanges: client(ExchangeService), ttlMs: 60_000, maxEntries: 2, clock });
    for (let i = 0; i < 3; i++) {
      const { conversationId } = await handlers.conversations.create(workspaceId, {});
      await directory.check(workspaceId, conversationId!);
      remembered.push(conversationId!);
    }
    await server.close(0);
  });

  it('routes from the last snapshot', async () => {
    await expect(routing.refresh()).rejects.toThrow();
    const overseas = shares(routing, 'fast', 'overseas-only');
    expect(overseas['gpt-4.1-nano']).toBeGreaterThan(0.92);
    // A replica that never read the scores routes uniformly.
    const fresh = new RoutingReplica({ log, catalog, routing: client(RoutingService), refreshMs: 100, sampler: new Sampler(3) });
    await expect(fresh.refresh()).rejects.toThrow();
    expect(shares(fresh, 'fast', 'overseas-only')['gpt-4o-mini']).toBeGreaterThan(0.25);
  });

  it('answers the conversations it remembers, up to its bound and its TTL; the others fail as unavailable (503)', async () => {
    await directory.check(workspaceId, remembered[2]);
    await directory.check(workspaceId, remembered[1]);
    // The oldest was forgotten for the bound of 2.
    const forgotten = await directory.check(workspaceId, remembered[0]).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(toErrorResponse(forgotten, 'req_1').status).toBe(503);
    now += 60_001;
    await expect(directory.check(workspaceId, remembered[2])).rejects.toBeInstanceOf(ConnectError);
  });
});
